// Interop: real libenet (Debian's 1.3.17) on one side of a loopback connection, Tern on the
// other, each side driven by its own thread exactly as an application would drive it.
//
// Both libraries are wrapped in one small Node interface so that a single script of traffic
// and checks runs in every pairing:
//   EnetClient_TernServer  libenet client -> tern::Host::listen server   (DESIGN §3.1)
//   TernClient_EnetServer  tern::Host client -> libenet server
//   EnetClient_EnetServer  libenet on both sides: proves the script and its expectations are
//                          what libenet itself does, so a failure in the pairings above is Tern's.
// Every pairing runs with and without ENet's CRC32 checksum mode on both sides.
//
// The server echoes every message back on the channel and with the delivery it arrived with;
// both sides check what they receive. No check depends on timing: every wait has a deadline
// only so that a broken peer fails the test instead of hanging it.

#include <enet/enet.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include <tern/endpoint.hpp>
#include <tern/host.hpp>
#include <tern/packet.hpp>
#include <tern/types.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;
using tern::Delivery;

// ---- the script's constants -------------------------------------------------------------------

constexpr std::size_t kChannelCount = 8;
// Not contiguous, and including the first and the last negotiated channel.
constexpr std::array<std::uint8_t, 4> kStreamChannels = {0, 1, 3, 7};
constexpr std::array<Delivery, 3> kDeliveries = {Delivery::reliable, Delivery::unreliable,
                                                 Delivery::unsequenced};
constexpr std::uint32_t kStreamMessages = 150;  // per channel and delivery
constexpr std::size_t kMaxOutstanding = 96;     // echoes the client may wait for at once
constexpr std::uint32_t kUnreliableFragmented = 8;
constexpr std::size_t kUnreliableFragmentedSize = 5000;  // a few fragments at the default MTU
constexpr std::uint8_t kFragmentChannel = 1;
constexpr std::size_t kBulkSize = std::size_t{1} << 20;
constexpr std::uint8_t kBulkChannel = 3;

constexpr std::uint32_t kConnectData = 0xC0FFEE42u;
constexpr std::uint32_t kClientByeData = 0xB1E0C11Eu;
constexpr std::uint32_t kServerByeData = 0xB1E05E7Fu;

constexpr auto kConnectTimeout = 5s;
constexpr auto kQuietTimeout = 3s;  // no progress at all for this long: give up waiting
constexpr auto kBulkTimeout = 20s;
constexpr auto kDisconnectTimeout = 5s;
constexpr auto kServerGrace = 3s;  // how long the server lingers once the client is done
constexpr auto kScenarioTimeout = 60s;

// Message kinds, the first byte of every payload.
constexpr std::uint8_t kStream = 'S';
constexpr std::uint8_t kFragmented = 'U';
constexpr std::uint8_t kBulk = 'B';
constexpr std::uint8_t kQuit = 'Q';  // asks the server to disconnect the client

const char* delivery_name(Delivery d) { return tern::to_string(d); }

// ---- payloads ---------------------------------------------------------------------------------
//
// [0] kind  [1] delivery  [2] channel  [3] 0x5A  [4..7] sequence (big-endian)  [8..] pattern
// The pattern depends on every header field and on the byte position (including its higher
// bits), so a misplaced fragment, a swapped message or a stale buffer shows up as a mismatch.

constexpr std::size_t kHeaderBytes = 8;

struct Header {
  std::uint8_t kind = 0;
  Delivery delivery = Delivery::reliable;
  std::uint8_t channel = 0;
  std::uint32_t seq = 0;
};

std::uint8_t pattern_byte(const Header& h, std::size_t i) {
  const auto x = static_cast<std::uint32_t>(i);
  return static_cast<std::uint8_t>(x * 17u + (x >> 8) * 5u + (x >> 16) * 3u + h.seq * 131u +
                                   h.channel * 7u + h.kind +
                                   static_cast<unsigned>(h.delivery) * 11u);
}

std::size_t stream_size(std::uint32_t seq) { return kHeaderBytes + (seq * 37u) % 300u; }

std::vector<std::uint8_t> make_payload(const Header& h, std::size_t size) {
  std::vector<std::uint8_t> b(std::max(size, kHeaderBytes));
  b[0] = h.kind;
  b[1] = static_cast<std::uint8_t>(h.delivery);
  b[2] = h.channel;
  b[3] = 0x5A;
  b[4] = static_cast<std::uint8_t>(h.seq >> 24);
  b[5] = static_cast<std::uint8_t>(h.seq >> 16);
  b[6] = static_cast<std::uint8_t>(h.seq >> 8);
  b[7] = static_cast<std::uint8_t>(h.seq);
  for (std::size_t i = kHeaderBytes; i < b.size(); ++i) b[i] = pattern_byte(h, i);
  return b;
}

// The header if the payload is well formed and every pattern byte is right.
std::optional<Header> parse_payload(std::span<const std::uint8_t> b, std::string& why) {
  if (b.size() < kHeaderBytes || b[3] != 0x5A || b[1] > 2) {
    why = "malformed header (" + std::to_string(b.size()) + " bytes)";
    return std::nullopt;
  }
  Header h;
  h.kind = b[0];
  h.delivery = static_cast<Delivery>(b[1]);
  h.channel = b[2];
  h.seq = (std::uint32_t{b[4]} << 24) | (std::uint32_t{b[5]} << 16) | (std::uint32_t{b[6]} << 8) |
          std::uint32_t{b[7]};
  for (std::size_t i = kHeaderBytes; i < b.size(); ++i) {
    if (b[i] != pattern_byte(h, i)) {
      why = "payload byte " + std::to_string(i) + " of " + std::to_string(b.size()) + " is " +
            std::to_string(b[i]) + ", expected " + std::to_string(pattern_byte(h, i));
      return std::nullopt;
    }
  }
  return h;
}

// ---- one side of a connection, whichever library implements it -------------------------------

struct NodeEvent {
  enum Kind { none, connect, receive, disconnect } kind = none;
  std::uint8_t channel = 0;
  Delivery delivery = Delivery::reliable;
  std::uint32_t data = 0;
  std::optional<tern::DisconnectReason> reason;  // Tern reports it; libenet does not
  std::vector<std::uint8_t> payload;
};

class Node {
 public:
  virtual ~Node() = default;
  virtual bool ok() const = 0;
  virtual std::string error() const = 0;
  virtual std::uint16_t port() const = 0;
  virtual bool connect(std::uint16_t port, std::size_t channels, std::uint32_t data) = 0;
  // One service call: sends what is queued, receives, and returns at most one event,
  // waiting up to `wait` for it.
  virtual bool poll(NodeEvent& ev, std::chrono::milliseconds wait) = 0;
  virtual bool send(std::uint8_t channel, Delivery d, std::span<const std::uint8_t> bytes,
                    std::string& why) = 0;
  virtual void disconnect(std::uint32_t data) = 0;
  virtual bool has_peer() const = 0;
};

class EnetNode final : public Node {
 public:
  EnetNode(bool server, bool checksum) {
    ENetAddress address{};
    enet_address_set_host_ip(&address, "127.0.0.1");
    address.port = 0;
    host_ = enet_host_create(server ? &address : nullptr, server ? 4 : 1,
                             ENET_PROTOCOL_MAXIMUM_CHANNEL_COUNT, 0, 0);
    if (host_ != nullptr && checksum) host_->checksum = enet_crc32;
  }
  ~EnetNode() override {
    if (host_ != nullptr) enet_host_destroy(host_);
  }
  bool ok() const override { return host_ != nullptr; }
  std::string error() const override { return "enet_host_create failed"; }
  std::uint16_t port() const override { return host_->address.port; }

  bool connect(std::uint16_t port, std::size_t channels, std::uint32_t data) override {
    ENetAddress to{};
    enet_address_set_host_ip(&to, "127.0.0.1");
    to.port = port;
    peer_ = enet_host_connect(host_, &to, channels, data);
    return peer_ != nullptr;
  }

  bool poll(NodeEvent& ev, std::chrono::milliseconds wait) override {
    ENetEvent e;
    const int got = enet_host_service(host_, &e, static_cast<enet_uint32>(wait.count()));
    if (got <= 0) return false;
    ev = NodeEvent{};
    switch (e.type) {
      case ENET_EVENT_TYPE_CONNECT:
        peer_ = e.peer;
        // The packet throttle may drop unreliable messages whenever the RTT rises, which on a
        // loaded test machine it does; the script expects every message on loopback. A zero
        // deceleration keeps the throttle open, and because libenet sends it to the other side
        // as THROTTLE_CONFIGURE it also keeps the remote's throttle open (Tern included).
        enet_peer_throttle_configure(peer_, ENET_PEER_PACKET_THROTTLE_INTERVAL,
                                     ENET_PEER_PACKET_THROTTLE_ACCELERATION, 0);
        ev.kind = NodeEvent::connect;
        ev.data = e.data;
        return true;
      case ENET_EVENT_TYPE_RECEIVE: {
        ev.kind = NodeEvent::receive;
        ev.channel = e.channelID;
        if (e.packet->flags & ENET_PACKET_FLAG_RELIABLE) {
          ev.delivery = Delivery::reliable;
        } else if (e.packet->flags & ENET_PACKET_FLAG_UNSEQUENCED) {
          ev.delivery = Delivery::unsequenced;
        } else {
          ev.delivery = Delivery::unreliable;
        }
        ev.payload.assign(e.packet->data, e.packet->data + e.packet->dataLength);
        enet_packet_destroy(e.packet);
        return true;
      }
      case ENET_EVENT_TYPE_DISCONNECT:
        if (e.peer == peer_) peer_ = nullptr;
        ev.kind = NodeEvent::disconnect;
        ev.data = e.data;
        return true;
      case ENET_EVENT_TYPE_NONE: break;
    }
    return false;
  }

  bool send(std::uint8_t channel, Delivery d, std::span<const std::uint8_t> bytes,
            std::string& why) override {
    if (peer_ == nullptr) {
      why = "no peer";
      return false;
    }
    enet_uint32 flags = 0;
    switch (d) {
      case Delivery::reliable:
      case Delivery::reliable_unordered:
      case Delivery::reliable_sequenced: flags = ENET_PACKET_FLAG_RELIABLE; break;
      // Without UNRELIABLE_FRAGMENT libenet upgrades an unreliable message above the MTU to
      // reliable fragments; the script wants unreliable fragments on the wire.
      case Delivery::unreliable: flags = ENET_PACKET_FLAG_UNRELIABLE_FRAGMENT; break;
      case Delivery::unsequenced: flags = ENET_PACKET_FLAG_UNSEQUENCED; break;
    }
    ENetPacket* p = enet_packet_create(bytes.data(), bytes.size(), flags);
    if (p == nullptr || enet_peer_send(peer_, channel, p) != 0) {
      if (p != nullptr) enet_packet_destroy(p);
      why = "enet_peer_send failed";
      return false;
    }
    return true;
  }

  void disconnect(std::uint32_t data) override {
    if (peer_ != nullptr) enet_peer_disconnect(peer_, data);
  }
  bool has_peer() const override { return peer_ != nullptr; }

 private:
  ENetHost* host_ = nullptr;
  ENetPeer* peer_ = nullptr;
};

class TernNode final : public Node {
 public:
  explicit TernNode(bool checksum) {
    tern::HostOptions options;
    options.checksum = checksum;
    // The same cases with secure sessions optional (test 'interop_optional'): libenet peers
    // must see no difference.
    if (const char* s = std::getenv("TERN_INTEROP_SECURITY"); s && std::string(s) == "optional") {
      options.security = tern::Security::optional;
      options.token_keys.push_back(tern::TokenKey{1, {}});
    }
    host_ = tern::Host::listen(options, *tern::Endpoint::parse("127.0.0.1:0"), error_);
  }
  bool ok() const override { return host_ != nullptr; }
  std::string error() const override { return "tern::Host::listen: " + error_; }
  std::uint16_t port() const override { return host_->local_endpoint().port; }

  bool connect(std::uint16_t port, std::size_t channels, std::uint32_t data) override {
    peer_ = host_->connect(tern::Endpoint::v4(0x7f000001u, port), channels, data);
    return peer_.valid();
  }

  bool poll(NodeEvent& ev, std::chrono::milliseconds wait) override {
    tern::Event e;
    if (!host_->service(e, wait)) return false;
    ev = NodeEvent{};
    switch (e.type) {
      case tern::EventType::connect:
        peer_ = e.peer;
        ev.kind = NodeEvent::connect;
        ev.data = e.data;
        return true;
      case tern::EventType::receive: {
        ev.kind = NodeEvent::receive;
        ev.channel = e.channel;
        ev.delivery = e.delivery;
        const auto bytes = e.packet.bytes();
        ev.payload.resize(bytes.size());
        if (!bytes.empty()) std::memcpy(ev.payload.data(), bytes.data(), bytes.size());
        return true;
      }
      case tern::EventType::disconnect:
        if (e.peer == peer_) peer_ = tern::PeerHandle{};
        ev.kind = NodeEvent::disconnect;
        ev.data = e.data;
        ev.reason = e.reason;
        return true;
      case tern::EventType::receipt:        // never asked for (send_with_receipt)
      case tern::EventType::block_refused:  // no block sent
      case tern::EventType::none: break;
    }
    return false;
  }

  bool send(std::uint8_t channel, Delivery d, std::span<const std::uint8_t> bytes,
            std::string& why) override {
    const auto r = host_->send(peer_, channel, d, std::as_bytes(bytes));
    if (r != tern::SendResult::ok) {
      why = std::string("tern::Host::send: ") + tern::to_string(r);
      return false;
    }
    return true;
  }

  void disconnect(std::uint32_t data) override { host_->disconnect(peer_, data); }
  bool has_peer() const override { return peer_.valid(); }

 private:
  std::string error_;
  std::unique_ptr<tern::Host> host_;
  tern::PeerHandle peer_;
};

enum class Impl { enet, tern };

std::unique_ptr<Node> make_node(Impl impl, bool server, bool checksum) {
  if (impl == Impl::enet) return std::make_unique<EnetNode>(server, checksum);
  return std::make_unique<TernNode>(checksum);
}

// ---- checks -----------------------------------------------------------------------------------

// Failures seen by one side; capped so a systematic fault does not flood the log.
class Failures {
 public:
  explicit Failures(std::string side) : side_(std::move(side)) {}
  void add(const std::string& what) {
    if (list_.size() < 25)
      list_.push_back(side_ + ": " + what);
    else if (list_.size() == 25)
      list_.push_back(side_ + ": (further failures not shown)");
  }
  const std::vector<std::string>& list() const { return list_; }

 private:
  std::string side_;
  std::vector<std::string> list_;
};

// Per (kind, delivery, channel): what the ENet delivery guarantees promise about sequence
// numbers. Sequences start at 0 and the sender sends them in increasing order.
class StreamChecker {
 public:
  explicit StreamChecker(Failures& f) : f_(f) {}

  // Returns the parsed header of a valid message, after recording any violation.
  std::optional<Header> on_receive(const NodeEvent& ev) {
    std::string why;
    auto h = parse_payload(ev.payload, why);
    if (!h) {
      f_.add("corrupt message on channel " + std::to_string(ev.channel) + ": " + why);
      return std::nullopt;
    }
    if (h->channel != ev.channel) {
      f_.add("message sent on channel " + std::to_string(h->channel) + " arrived on channel " +
             std::to_string(ev.channel));
    }
    if (h->delivery != ev.delivery) {
      f_.add(std::string("message sent ") + delivery_name(h->delivery) + " arrived flagged " +
             delivery_name(ev.delivery));
    }
    auto& s = streams_[{h->kind, h->delivery, h->channel}];
    const std::string where = std::string(1, static_cast<char>(h->kind)) + "/" +
                              delivery_name(h->delivery) + "/ch" + std::to_string(h->channel) +
                              " seq " + std::to_string(h->seq);
    switch (h->delivery) {
      case Delivery::reliable:
      case Delivery::reliable_unordered:  // libenet knows only in-order reliable delivery
      case Delivery::reliable_sequenced:
        if (h->seq != s.next) {
          f_.add("reliable out of order or duplicated: " + where + ", expected seq " +
                 std::to_string(s.next));
        }
        s.next = h->seq + 1;
        break;
      case Delivery::unreliable:
        if (s.count > 0 && h->seq <= s.last) {
          f_.add("unreliable went backwards or repeated: " + where + " after seq " +
                 std::to_string(s.last));
        }
        s.last = h->seq;
        break;
      case Delivery::unsequenced:
        if (!s.seen.insert(h->seq).second) f_.add("unsequenced duplicate: " + where);
        break;
    }
    ++s.count;
    return h;
  }

  std::uint32_t count(std::uint8_t kind, Delivery d, std::uint8_t channel) const {
    auto it = streams_.find({kind, d, channel});
    return it == streams_.end() ? 0 : it->second.count;
  }

  // Loopback loses nothing, so every message sent must have arrived.
  void expect_complete(const char* what) {
    for (auto ch : kStreamChannels) {
      for (auto d : kDeliveries) {
        const auto n = count(kStream, d, ch);
        if (n != kStreamMessages) {
          f_.add(std::string(what) + ": " + delivery_name(d) + " channel " + std::to_string(ch) +
                 " got " + std::to_string(n) + " of " + std::to_string(kStreamMessages));
        }
      }
    }
    const auto u = count(kFragmented, Delivery::unreliable, kFragmentChannel);
    if (u != kUnreliableFragmented) {
      f_.add(std::string(what) + ": fragmented unreliable got " + std::to_string(u) + " of " +
             std::to_string(kUnreliableFragmented));
    }
  }

 private:
  struct Stream {
    std::uint32_t next = 0;  // reliable: the sequence expected next
    std::uint32_t last = 0;  // unreliable: the latest delivered
    std::uint32_t count = 0;
    std::set<std::uint32_t> seen;  // unsequenced
  };
  Failures& f_;
  std::map<std::tuple<std::uint8_t, Delivery, std::uint8_t>, Stream> streams_;
};

enum class Scenario {
  traffic,            // streams, fragments, 1 MiB; the client disconnects
  server_disconnect,  // a little traffic; then the server disconnects the client
};

struct Params {
  Impl client;
  Impl server;
  bool checksum;
};

const char* impl_name(Impl i) { return i == Impl::enet ? "libenet" : "tern"; }

// ---- the server: echo everything, check everything -------------------------------------------

std::vector<std::string> run_server(const Params& p, Scenario scenario,
                                    std::promise<std::uint16_t>& port_out,
                                    const std::atomic<bool>& client_done) {
  Failures f(std::string(impl_name(p.server)) + " server");
  auto node = make_node(p.server, /*server=*/true, p.checksum);
  if (!node->ok()) {
    f.add(node->error());
    port_out.set_value(0);
    return f.list();
  }
  port_out.set_value(node->port());

  StreamChecker checker(f);
  const auto give_up = SteadyClock::now() + kScenarioTimeout;
  std::optional<SteadyClock::time_point> linger_until;
  bool connected = false, disconnected = false, asked_to_quit = false;
  while (!disconnected && SteadyClock::now() < give_up) {
    if (client_done.load() && !linger_until) linger_until = SteadyClock::now() + kServerGrace;
    if (linger_until && SteadyClock::now() > *linger_until) break;
    NodeEvent ev;
    if (!node->poll(ev, 5ms)) continue;
    switch (ev.kind) {
      case NodeEvent::connect:
        if (connected) f.add("second connect event");
        connected = true;
        if (ev.data != kConnectData) {
          f.add("connect data " + std::to_string(ev.data) + ", expected " +
                std::to_string(kConnectData));
        }
        break;
      case NodeEvent::receive: {
        auto h = checker.on_receive(ev);
        if (h && h->kind == kQuit) {
          // Not echoed: a graceful ENet disconnect discards whatever is still queued.
          asked_to_quit = true;
          node->disconnect(kServerByeData);
          break;
        }
        std::string why;
        if (!node->send(ev.channel, ev.delivery, ev.payload, why)) f.add("echo failed: " + why);
        break;
      }
      case NodeEvent::disconnect:
        disconnected = true;
        if (scenario == Scenario::traffic) {
          if (ev.data != kClientByeData) {
            f.add("disconnect data " + std::to_string(ev.data) + ", expected " +
                  std::to_string(kClientByeData));
          }
          if (ev.reason && *ev.reason != tern::DisconnectReason::remote) {
            f.add(std::string("disconnect reason ") + tern::to_string(*ev.reason) +
                  ", expected remote");
          }
        } else if (ev.reason && *ev.reason != tern::DisconnectReason::local) {
          f.add(std::string("own disconnect completed with reason ") + tern::to_string(*ev.reason) +
                ", expected local");
        }
        break;
      case NodeEvent::none: break;
    }
  }
  if (!connected) f.add("no connect event");
  if (!disconnected) f.add("no disconnect event");
  if (scenario == Scenario::traffic) {
    checker.expect_complete("received from client");
    if (checker.count(kBulk, Delivery::reliable, kBulkChannel) != 1) {
      f.add("1 MiB message not received");
    }
  } else if (!asked_to_quit) {
    f.add("quit request not received");
  }
  return f.list();
}

// ---- the client: drives the script -----------------------------------------------------------

class ClientRun {
 public:
  ClientRun(const Params& p, Failures& f) : p_(p), f_(f), checker_(f) {}

  void run(Scenario scenario, std::uint16_t port) {
    node_ = make_node(p_.client, /*server=*/false, p_.checksum);
    if (!node_->ok()) {
      f_.add(node_->error());
      return;
    }
    if (!node_->connect(port, kChannelCount, kConnectData)) {
      f_.add("connect() refused to start");
      return;
    }
    if (!wait_for([&] { return connected_; }, kConnectTimeout)) {
      f_.add("no connect event within 5 s");
      return;
    }
    if (scenario == Scenario::traffic) {
      streams();
      fragmented_unreliable();
      bulk();
      if (disconnected_) return;
      node_->disconnect(kClientByeData);
      if (!wait_for([&] { return disconnected_; }, kDisconnectTimeout)) {
        f_.add("own disconnect never completed");
      } else if (bye_reason_ && *bye_reason_ != tern::DisconnectReason::local) {
        f_.add(std::string("own disconnect completed with reason ") +
               tern::to_string(*bye_reason_) + ", expected local");
      }
    } else {
      // A few reliable messages, all echoed back, then the request to be disconnected.
      for (std::uint32_t seq = 0; seq < 20; ++seq) {
        for (auto ch : kStreamChannels) send_stream(ch, Delivery::reliable, seq);
      }
      wait_for([&] { return received_ >= 20 * kStreamChannels.size(); }, kQuietTimeout);
      if (received_ != 20 * kStreamChannels.size()) {
        f_.add("got " + std::to_string(received_) + " of " +
               std::to_string(20 * kStreamChannels.size()) + " echoes before asking to quit");
      }
      send(Header{kQuit, Delivery::reliable, 0, 0}, kHeaderBytes);
      if (!wait_for([&] { return disconnected_; }, kDisconnectTimeout)) {
        f_.add("the server's disconnect never arrived");
      } else {
        if (bye_data_ != kServerByeData) {
          f_.add("disconnect data " + std::to_string(bye_data_) + ", expected " +
                 std::to_string(kServerByeData));
        }
        if (bye_reason_ && *bye_reason_ != tern::DisconnectReason::remote) {
          f_.add(std::string("disconnect reason ") + tern::to_string(*bye_reason_) +
                 ", expected remote");
        }
      }
    }
  }

  // Destroyed in the thread that created it: Tern's packet pool is per thread.
  void close() { node_.reset(); }

 private:
  void send(const Header& h, std::size_t size) {
    const auto bytes = make_payload(h, size);
    std::string why;
    if (!node_->send(h.channel, h.delivery, bytes, why)) {
      f_.add("send " + std::string(1, static_cast<char>(h.kind)) + "/" + delivery_name(h.delivery) +
             "/ch" + std::to_string(h.channel) + " seq " + std::to_string(h.seq) +
             " failed: " + why);
    }
  }
  void send_stream(std::uint8_t ch, Delivery d, std::uint32_t seq) {
    send(Header{kStream, d, ch, seq}, stream_size(seq));
  }

  // One service call; the wait only matters when nothing is pending.
  void pump(std::chrono::milliseconds wait) {
    NodeEvent ev;
    if (!node_->poll(ev, wait)) return;
    switch (ev.kind) {
      case NodeEvent::connect:
        if (connected_) f_.add("second connect event");
        connected_ = true;
        break;
      case NodeEvent::receive:
        ++received_;
        last_progress_ = SteadyClock::now();
        // A corrupted 1 MiB echo is already a failure; waiting on for an intact one would
        // only add the timeout.
        checker_.on_receive(ev);
        if (!ev.payload.empty() && ev.payload[0] == kBulk) bulk_echoed_ = true;
        break;
      case NodeEvent::disconnect:
        if (!connected_) f_.add("disconnect event before any connect event");
        disconnected_ = true;
        bye_data_ = ev.data;
        bye_reason_ = ev.reason;
        break;
      case NodeEvent::none: break;
    }
  }

  // Services until `done` holds; false if `limit` passes first.
  template <typename Pred>
  bool wait_for(Pred done, SteadyClock::duration limit) {
    const auto deadline = SteadyClock::now() + limit;
    while (!done()) {
      if (SteadyClock::now() > deadline) return false;
      pump(1ms);
    }
    return true;
  }

  // Waits for all echoes, or until they stop coming; never longer than kQuietTimeout of
  // silence (a lost unreliable echo would otherwise be waited for forever).
  void drain(std::size_t expected) {
    last_progress_ = SteadyClock::now();
    while (received_ < expected && !disconnected_ &&
           SteadyClock::now() - last_progress_ < kQuietTimeout) {
      pump(1ms);
    }
  }

  void streams() {
    std::size_t expected = 0;
    for (std::uint32_t seq = 0; seq < kStreamMessages; ++seq) {
      for (auto ch : kStreamChannels) {
        for (auto d : kDeliveries) {
          send_stream(ch, d, seq);
          ++expected;
        }
      }
      // Bounded in flight, so that no socket buffer on the way has a reason to overflow.
      last_progress_ = SteadyClock::now();
      pump(0ms);
      while (expected - std::min(expected, received_) > kMaxOutstanding && !disconnected_ &&
             SteadyClock::now() - last_progress_ < kQuietTimeout) {
        pump(1ms);
      }
      if (disconnected_) break;
    }
    drain(expected);
    if (disconnected_) f_.add("disconnected during the stream phase");
  }

  void fragmented_unreliable() {
    const std::size_t before = received_;
    for (std::uint32_t seq = 0; seq < kUnreliableFragmented; ++seq) {
      send(Header{kFragmented, Delivery::unreliable, kFragmentChannel, seq},
           kUnreliableFragmentedSize);
      pump(1ms);
    }
    drain(before + kUnreliableFragmented);
  }

  void bulk() {
    send(Header{kBulk, Delivery::reliable, kBulkChannel, 0}, kBulkSize);
    if (!wait_for([&] { return bulk_echoed_ || disconnected_; }, kBulkTimeout) || !bulk_echoed_) {
      f_.add("1 MiB echo did not arrive within 20 s");
    }
  }

 public:
  void final_checks(Scenario scenario) {
    if (scenario == Scenario::traffic) checker_.expect_complete("echoes received");
  }

 private:
  Params p_;
  Failures& f_;
  StreamChecker checker_;
  std::unique_ptr<Node> node_;
  std::size_t received_ = 0;
  bool connected_ = false;
  bool disconnected_ = false;
  bool bulk_echoed_ = false;
  std::uint32_t bye_data_ = 0;
  std::optional<tern::DisconnectReason> bye_reason_;
  SteadyClock::time_point last_progress_ = SteadyClock::now();
};

std::vector<std::string> run_client(const Params& p, Scenario scenario,
                                    std::future<std::uint16_t>& port_in) {
  Failures f(std::string(impl_name(p.client)) + " client");
  if (port_in.wait_for(10s) != std::future_status::ready) {
    f.add("server never published its port");
    return f.list();
  }
  const std::uint16_t port = port_in.get();
  if (port == 0) {
    f.add("server did not start");
    return f.list();
  }
  ClientRun run(p, f);
  run.run(scenario, port);
  run.final_checks(scenario);
  run.close();
  return f.list();
}

// ---- fixture ----------------------------------------------------------------------------------

class Interop : public ::testing::TestWithParam<Params> {
 protected:
  static void SetUpTestSuite() {
    static const bool initialised = [] {
      const bool ok = enet_initialize() == 0;
      // libenet's clock base is a global set on first use; touch it before two threads race
      // to do so.
      (void)enet_time_get();
      return ok;
    }();
    ASSERT_TRUE(initialised) << "enet_initialize failed";
  }

  void run_scenario(Scenario scenario) {
    const Params p = GetParam();
    std::promise<std::uint16_t> port;
    auto port_future = port.get_future();
    std::atomic<bool> client_done{false};
    std::vector<std::string> server_failures, client_failures;
    std::thread server([&] { server_failures = run_server(p, scenario, port, client_done); });
    std::thread client([&] {
      client_failures = run_client(p, scenario, port_future);
      client_done.store(true);
    });
    client.join();
    server.join();
    for (const auto& s : client_failures) ADD_FAILURE() << s;
    for (const auto& s : server_failures) ADD_FAILURE() << s;
  }
};

TEST_P(Interop, TrafficFragmentsBulkAndClientDisconnect) { run_scenario(Scenario::traffic); }

TEST_P(Interop, ServerDisconnectsClient) { run_scenario(Scenario::server_disconnect); }

std::string param_name(const ::testing::TestParamInfo<Params>& info) {
  const auto& p = info.param;
  std::string name = std::string(p.client == Impl::enet ? "Enet" : "Tern") + "Client_" +
                     (p.server == Impl::enet ? "Enet" : "Tern") + "Server";
  return name + (p.checksum ? "_Checksum" : "_Plain");
}

INSTANTIATE_TEST_SUITE_P(
    Pairings, Interop,
    ::testing::Values(Params{Impl::enet, Impl::tern, false}, Params{Impl::enet, Impl::tern, true},
                      Params{Impl::tern, Impl::enet, false}, Params{Impl::tern, Impl::enet, true},
                      Params{Impl::enet, Impl::enet, false}, Params{Impl::enet, Impl::enet, true}),
    param_name);

}  // namespace
