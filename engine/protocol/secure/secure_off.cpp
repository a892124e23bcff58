// Built without libsodium: every token is refused and nothing is sealed, so a host can only
// run the plain policy (meson_options.txt 'secure').
#include "secure/secure.hpp"

#include <cstring>

namespace tern::proto::sec {

bool TokenContents::lists(const Endpoint&) const { return false; }
const char* token_error_name(TokenError) { return "unavailable"; }
const char* open_error_name(OpenError) { return "unavailable"; }
void seal_token(const TokenKey&, const TokenHeader&, const TokenContents&,
                std::span<std::uint8_t, kTokenBytes> out) {
  std::memset(out.data(), 0, out.size());
}
TokenError open_token(std::span<const std::uint8_t>, const KeyRing&, std::uint64_t, TokenHeader&,
                      TokenContents&) {
  return TokenError::forged;
}
void mint_token(const TokenKey&, std::uint64_t, std::uint64_t, const TokenContents&,
                std::span<std::uint8_t, kTokenBytes> out) {
  std::memset(out.data(), 0, out.size());
}
TokenError TokenNonceTable::remember(const TokenHeader&, const Endpoint&, std::uint64_t) {
  return TokenError::reused;
}
std::size_t seal_datagram(SealState&, std::uint8_t*, std::size_t, std::size_t) { return 0; }
ReplayWindow::Verdict ReplayWindow::check(std::uint64_t) const { return Verdict::past_limit; }
void ReplayWindow::accept(std::uint64_t) {}
OpenError open_datagram_to(const Key&, ReplayWindow&, const std::uint8_t*, std::size_t, std::size_t,
                           std::uint8_t*, std::size_t&, const AesState*) {
  return OpenError::forged;
}
OpenError open_datagram(const Key&, ReplayWindow&, std::uint8_t*, std::size_t, std::size_t,
                        std::size_t&, const AesState*) {
  return OpenError::forged;
}
bool available() { return false; }
bool aes_available() { return false; }
bool expand_aes(const Key&, AesState&) { return false; }
void random_bytes(std::uint8_t* out, std::size_t n) { std::memset(out, 0, n); }
Key derive_key(const Key&, std::uint8_t, const std::uint8_t*, std::size_t) { return Key{}; }

}  // namespace tern::proto::sec
