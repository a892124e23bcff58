// tern-token: keys and connect tokens for secure sessions (engine/protocol/WIRE.md, "Secure
// sessions").
//
//   tern-token keygen FILE [--id N]          a new random key, written 0600 (never overwrites)
//   tern-token mint --key FILE --client-id N --server ADDR[,ADDR...]
//                   [--expire S] [--timeout S] [--user-data STR] [--out FILE]
//
// mint prints the client's connect token (one line of hex: the sealed token, then the
// client-to-server and server-to-client keys) or writes it to --out. Exit 0 on success, 1 on a
// failure (a key file it cannot read names file, line and reason), 2 on a bad command line.
#include "common/cli.hpp"

#include <tern/secure.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

namespace {

constexpr const char* kUsage =
    "usage: tern-token keygen FILE [--id N]\n"
    "       tern-token mint --key FILE --client-id N --server ADDR[,ADDR...]\n"
    "                       [--expire SECONDS] [--timeout SECONDS] [--user-data STR]\n"
    "                       [--out FILE]\n"
    "  keygen   write a new random 32-byte key with key id N (default 1) to FILE (mode 0600)\n"
    "  mint     print a connect token valid for the servers listed (up to 8), for --expire\n"
    "           seconds (default 30); --timeout is the connection's idle timeout (default 10)\n";

int usage_error(const std::string& error) {
  std::fprintf(stderr, "tern-token: %s\n%s", error.c_str(), kUsage);
  return 2;
}

int keygen(int argc, char** argv) {
  if (argc < 3 || argv[2][0] == '-') return usage_error("keygen: FILE missing");
  static constexpr tern::app::FlagSpec specs[] = {{"id", true}};
  tern::app::CommandLine cl;
  std::string error;
  if (!cl.parse(argc - 2, argv + 2, specs, error)) return usage_error(error);
  std::uint64_t id = 1;
  if (!tern::app::read_uint(cl, "id", 0, 0xffffffffu, id, error)) return usage_error(error);
  if (!tern::save_token_key(argv[2], tern::generate_token_key(static_cast<std::uint32_t>(id)),
                            error)) {
    std::fprintf(stderr, "tern-token: %s\n", error.c_str());
    return 1;
  }
  return 0;
}

int mint(int argc, char** argv) {
  static constexpr tern::app::FlagSpec specs[] = {
      {"key", true},     {"client-id", true}, {"server", true}, {"expire", true},
      {"timeout", true}, {"user-data", true}, {"out", true}};
  tern::app::CommandLine cl;
  std::string error;
  if (!cl.parse(argc - 1, argv + 1, specs, error)) return usage_error(error);
  const auto key_file = cl.value("key");
  if (!key_file) return usage_error("mint: --key FILE missing");
  const auto client = cl.value("client-id");
  if (!client) return usage_error("mint: --client-id missing");
  tern::TokenRequest request;
  std::uint64_t expire = 30;
  if (!tern::app::read_uint(cl, "client-id", 0, UINT64_MAX, request.client_id, error) ||
      !tern::app::read_uint(cl, "expire", 1, 1u << 30, expire, error) ||
      !tern::app::read_uint(cl, "timeout", 1, 3600, request.timeout_s, error)) {
    return usage_error(error);
  }
  const auto servers = cl.value("server");
  if (!servers) return usage_error("mint: --server ADDR missing");
  for (std::string_view rest = *servers; !rest.empty();) {
    const auto comma = rest.find(',');
    const std::string_view one = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    const auto ep = tern::Endpoint::parse(one);
    if (!ep || ep->is_unspecified()) {
      return usage_error("--server: '" + std::string(one) + "' is not an address:port");
    }
    request.servers.push_back(*ep);
  }
  if (auto v = cl.value("user-data")) request.user_data = std::string(*v);
  request.now_s =
      static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                     std::chrono::system_clock::now().time_since_epoch())
                                     .count());
  request.expire_s = request.now_s + expire;

  tern::TokenKey key;
  if (!tern::load_token_key(std::string(*key_file), key, error)) {
    std::fprintf(stderr, "tern-token: %s\n", error.c_str());
    return 1;
  }
  tern::ConnectToken token;
  if (!tern::mint_token(key, request, token, error)) return usage_error(error);
  const std::string line = tern::format_connect_token(token) + "\n";
  if (auto out = cl.value("out")) {
    std::ofstream f{std::string(*out)};
    if (!(f << line) || !f.flush()) {
      std::fprintf(stderr, "tern-token: %s: cannot write\n", std::string(*out).c_str());
      return 1;
    }
    return 0;
  }
  std::fputs(line.c_str(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage_error("a command is required");
  const std::string_view command = argv[1];
  if (command == "--help" || command == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (command == "keygen") return keygen(argc, argv);
  if (command == "mint") return mint(argc, argv);
  return usage_error("unknown command '" + std::string(command) + "'");
}
