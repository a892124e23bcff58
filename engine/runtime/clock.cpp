#include "driver.hpp"

#include <chrono>

namespace tern::rt {

std::uint64_t SteadyClock::now_us() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

}  // namespace tern::rt
