// tern/secure.hpp: key files and token minting over the protocol layer's token format.
#include <tern/secure.hpp>

#include "secure/secure.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <span>

namespace tern {
namespace {

std::string to_hex(const std::uint8_t* p, std::size_t n) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s(2 * n, '0');
  for (std::size_t i = 0; i < n; ++i) {
    s[2 * i] = digits[p[i] >> 4];
    s[2 * i + 1] = digits[p[i] & 15];
  }
  return s;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool from_hex(std::string_view hex, std::uint8_t* out, std::size_t n) {
  if (hex.size() != 2 * n) return false;
  for (std::size_t i = 0; i < n; ++i) {
    const int hi = hex_digit(hex[2 * i]);
    const int lo = hex_digit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<std::uint8_t>(hi << 4 | lo);
  }
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

}  // namespace

TokenKey generate_token_key(std::uint32_t id) {
  if (!proto::sec::available()) std::abort();  // no random source: nothing safe to do
  TokenKey k;
  k.id = id;
  proto::sec::random_bytes(k.key.data(), k.key.size());
  return k;
}

std::string format_token_key(const TokenKey& key) {
  return "# Tern connect-token key: keep it secret (tern-token keygen)\nid " +
         std::to_string(key.id) + "\nkey " + to_hex(key.key.data(), key.key.size()) + "\n";
}

bool load_token_key(const std::string& path, TokenKey& out, std::string& error) {
  std::ifstream in(path);
  if (!in) {
    error = path + ": cannot open";
    return false;
  }
  bool have_id = false;
  bool have_key = false;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    std::string_view l = line;
    if (const auto hash = l.find('#'); hash != std::string_view::npos) l = l.substr(0, hash);
    l = trim(l);
    if (l.empty()) continue;
    const auto space = l.find_first_of(" \t");
    const std::string_view name = l.substr(0, space);
    const std::string_view value =
        space == std::string_view::npos ? std::string_view{} : trim(l.substr(space));
    const std::string where = path + ":" + std::to_string(number) + ": ";
    if (name == "id") {
      auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), out.id);
      if (ec != std::errc() || p != value.data() + value.size() || value.empty()) {
        error = where + "id: not a number from 0 to 4294967295";
        return false;
      }
      have_id = true;
    } else if (name == "key") {
      if (!from_hex(value, out.key.data(), out.key.size())) {
        error = where + "key: not 64 hex digits";
        return false;
      }
      have_key = true;
    } else {
      error = where + "unknown entry '" + std::string(name) + "' (expected id or key)";
      return false;
    }
  }
  if (!have_id || !have_key) {
    error = path + ": " + (have_id ? "key" : "id") + ": missing";
    return false;
  }
  return true;
}

bool save_token_key(const std::string& path, const TokenKey& key, std::string& error) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    error = path + ": cannot create (" + std::string(std::strerror(errno)) + ")";
    return false;
  }
  const std::string text = format_token_key(key);
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  if (!ok) error = path + ": write failed";
  return ok;
}

bool mint_token(const TokenKey& key, const TokenRequest& request, ConnectToken& out,
                std::string& error) {
  namespace sec = proto::sec;
  if (!proto::sec::available()) {
    error = "secure sessions unavailable (built without libsodium)";
    return false;
  }
  if (request.servers.empty() || request.servers.size() > sec::kMaxTokenServers) {
    error = "servers: need 1 to " + std::to_string(sec::kMaxTokenServers) + " addresses";
    return false;
  }
  if (request.user_data.size() > sec::kUserDataBytes) {
    error = "user data: more than " + std::to_string(sec::kUserDataBytes) + " bytes";
    return false;
  }
  if (request.expire_s <= request.now_s) {
    error = "expiry: not after the creation time";
    return false;
  }
  sec::TokenContents c;
  c.client_id = request.client_id;
  c.timeout_s = request.timeout_s;
  c.server_count = static_cast<std::uint8_t>(request.servers.size());
  for (std::size_t i = 0; i < request.servers.size(); ++i) c.servers[i] = request.servers[i];
  sec::random_bytes(c.client_to_server.data(), c.client_to_server.size());
  sec::random_bytes(c.server_to_client.data(), c.server_to_client.size());
  c.user_data_len = static_cast<std::uint16_t>(request.user_data.size());
  std::memcpy(c.user_data.data(), request.user_data.data(), request.user_data.size());
  out.sealed.assign(sec::kTokenBytes, 0);
  sec::mint_token(sec::TokenKey{key.id, key.key}, request.now_s, request.expire_s, c,
                  std::span<std::uint8_t, sec::kTokenBytes>(out.sealed.data(), sec::kTokenBytes));
  out.client_to_server = c.client_to_server;
  out.server_to_client = c.server_to_client;
  // Keys do not linger in freed stack memory (a volatile write the compiler keeps).
  auto* volatile wipe = reinterpret_cast<volatile std::uint8_t*>(&c);
  for (std::size_t i = 0; i < sizeof c; ++i) wipe[i] = 0;
  return true;
}

std::string format_connect_token(const ConnectToken& token) {
  return to_hex(token.sealed.data(), token.sealed.size()) +
         to_hex(token.client_to_server.data(), 32) + to_hex(token.server_to_client.data(), 32);
}

bool parse_connect_token(std::string_view hex, ConnectToken& out, std::string& error) {
  namespace sec = proto::sec;
  hex = trim(hex);
  while (!hex.empty() && hex.back() == '\n') hex = trim(hex.substr(0, hex.size() - 1));
  if (hex.size() != 2 * (sec::kTokenBytes + 64)) {
    error = "connect token: expected " + std::to_string(2 * (sec::kTokenBytes + 64)) +
            " hex digits, got " + std::to_string(hex.size());
    return false;
  }
  out.sealed.assign(sec::kTokenBytes, 0);
  if (!from_hex(hex.substr(0, 2 * sec::kTokenBytes), out.sealed.data(), sec::kTokenBytes) ||
      !from_hex(hex.substr(2 * sec::kTokenBytes, 64), out.client_to_server.data(), 32) ||
      !from_hex(hex.substr(2 * sec::kTokenBytes + 64, 64), out.server_to_client.data(), 32)) {
    error = "connect token: not hex";
    return false;
  }
  return true;
}

}  // namespace tern
