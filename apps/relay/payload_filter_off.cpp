// tern-relay's payload filter in a build without Hyperscan: rules are refused.
#include "payload_filter.hpp"

namespace tern::relay {

struct PayloadFilter::Impl {};

PayloadFilter::PayloadFilter() = default;
PayloadFilter::~PayloadFilter() = default;

void PayloadFilter::enable(std::size_t) {}
bool PayloadFilter::enabled() const { return false; }

bool PayloadFilter::load(const std::string& path, std::string& error) {
  error = "filter rules given (" + path + ") but this tern-relay was built without Hyperscan";
  return false;
}

std::size_t PayloadFilter::keep_datagrams(std::size_t, std::span<rt::RxFrame> frames,
                                          std::uint64_t) {
  return frames.size();
}
bool PayloadFilter::drops_message(std::size_t, const Endpoint&, std::span<const std::byte>,
                                  std::uint64_t) {
  return false;
}
bool PayloadFilter::has_new_bans(std::size_t) const { return false; }
std::size_t PayloadFilter::take_new_bans(std::size_t, std::span<FilterBan>) { return 0; }
void PayloadFilter::metrics(std::ostream&) const {}

}  // namespace tern::relay
