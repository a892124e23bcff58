// hello.cpp: the C++ API against an installed Tern. Built by install_test.py with nothing but
// `pkg-config --cflags --libs tern` (and -std=c++20, which the public headers need): two hosts
// on loopback, one reliable message there and back. Exits 0 when the echo came back intact.
// It also includes the C header, which must compile as C++, and prints the library's version.
#include <tern/tern.h>
#include <tern/host.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

int main() {
  using namespace std::chrono_literals;
  std::string error;
  auto server = tern::Host::listen({}, *tern::Endpoint::parse("127.0.0.1:0"), error);
  auto client =
      server ? tern::Host::listen({}, *tern::Endpoint::parse("127.0.0.1:0"), error) : nullptr;
  if (!server || !client) {
    std::fprintf(stderr, "hello: %s\n", error.c_str());
    return 1;
  }
  const tern::PeerHandle peer = client->connect(server->local_endpoint(), 1);
  const char text[] = "hello from C++";
  const auto bytes = std::as_bytes(std::span(text));
  for (int round = 0; round < 500; ++round) {  // gives up after ~5 s
    tern::Event ev;
    while (server->service(ev, 0us)) {
      if (ev.type == tern::EventType::receive) {
        server->send(ev.peer, ev.channel, ev.delivery, ev.take_payload());
      }
    }
    while (client->service(ev, 10ms)) {
      if (ev.type == tern::EventType::connect) {
        client->send(peer, 0, tern::Delivery::reliable, bytes);
      } else if (ev.type == tern::EventType::receive) {
        const auto got = ev.payload();
        const bool same =
            got.size() == bytes.size() && std::memcmp(got.data(), bytes.data(), got.size()) == 0;
        std::printf("hello: %s\nhello: libtern %s\n", same ? text : "(damaged echo)",
                    tern_version());
        return same ? 0 : 1;
      }
    }
  }
  std::fprintf(stderr, "hello: no echo\n");
  return 1;
}
