// Connect tokens for secure sessions (engine/protocol/WIRE.md, "Secure sessions").
//
// A token issuer (a matchmaker, tern-token) and the servers share a 32-byte key. The issuer
// mints a connect token for one client: a sealed part only the servers can open (client id,
// the servers it is valid for, per-direction session keys, user data) and the two session keys
// in clear for the client. Servers accept two key ids at once, so a key can be rotated.
// Available when Tern was built with libsodium (meson option 'secure'); without it
// mint_token fails and generate_token_key aborts.
#pragma once

#include <tern/endpoint.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tern {

struct TokenKey {
  std::uint32_t id = 0;
  std::array<std::uint8_t, 32> key{};
};

// A fresh random key with this id.
TokenKey generate_token_key(std::uint32_t id);
// The key file: lines "id N" and "key <64 hex digits>"; '#' starts a comment.
std::string format_token_key(const TokenKey& key);
// Errors name the file, the line and the reason.
bool load_token_key(const std::string& path, TokenKey& out, std::string& error);
// Written with mode 0600; refuses to overwrite an existing file.
bool save_token_key(const std::string& path, const TokenKey& key, std::string& error);

struct TokenRequest {
  std::uint64_t client_id = 0;
  std::uint32_t timeout_s = 10;   // the connection's idle timeout the server applies
  std::vector<Endpoint> servers;  // 1 to 8 addresses the token is valid for
  std::string user_data;          // at most 256 bytes (tern-relay reads "room=NAME")
  std::uint64_t now_s = 0;        // unix seconds
  std::uint64_t expire_s = 0;     // unix seconds, after now_s
};

// What the client holds: the sealed token it sends, and its session keys.
struct ConnectToken {
  std::vector<std::uint8_t> sealed;
  std::array<std::uint8_t, 32> client_to_server{};
  std::array<std::uint8_t, 32> server_to_client{};
};

bool mint_token(const TokenKey& key, const TokenRequest& request, ConnectToken& out,
                std::string& error);
// One line of hex: sealed token, client-to-server key, server-to-client key.
std::string format_connect_token(const ConnectToken& token);
bool parse_connect_token(std::string_view hex, ConnectToken& out, std::string& error);

}  // namespace tern
