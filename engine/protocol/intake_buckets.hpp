// The intake limits' two token buckets, one per peer or session (HostConfig::intake_rate and
// intake_bandwidth, KcpConfig's of the same names): messages a second and bytes a second, each
// as deep as one second of its rate, full at the first message. A message is taken whole or
// waits; one larger than a whole second of bandwidth needs only a full bucket, so it is never
// stuck for ever. Both the ENet and the KCP cores meter with it; what "waits" means is theirs.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace tern::proto {

struct IntakeBuckets {
  double messages = 0;
  double bytes = 0;
  std::uint64_t filled_ms = 0;  // 0: never filled, the buckets start full

  // Refills to now_ms, then takes one message of `size` bytes if both buckets allow; false
  // leaves them as refilled. Rates of 0 are unlimited (a caller with both 0 need not call).
  bool take(std::uint64_t now_ms, double rate, double bandwidth, std::size_t size) {
    refill(now_ms, rate, bandwidth);
    const auto need = static_cast<double>(size);
    if (rate != 0 && messages < 1) return false;
    if (bandwidth != 0 && bytes < std::min(need, bandwidth)) return false;
    messages -= 1;
    bytes -= need;
    return true;
  }

  // Milliseconds (rounded up, at least 1) until take() of `size` bytes would succeed, after a
  // take() that failed at now_ms with the same rates.
  std::uint64_t ms_until_ready(double rate, double bandwidth, std::size_t size) const {
    const auto need = static_cast<double>(size);
    double wait_s = 0;
    if (rate != 0 && messages < 1) wait_s = (1 - messages) / rate;
    if (bandwidth != 0 && bytes < std::min(need, bandwidth))
      wait_s = std::max(wait_s, (std::min(need, bandwidth) - bytes) / bandwidth);
    return static_cast<std::uint64_t>(wait_s * 1000.0) + 1;
  }

 private:
  void refill(std::uint64_t now_ms, double rate, double bandwidth) {
    if (filled_ms == 0) {
      messages = rate;
      bytes = bandwidth;
    } else {
      const double seconds = static_cast<double>(now_ms - filled_ms) / 1000.0;
      messages = std::min(rate, messages + seconds * rate);
      bytes = std::min(bandwidth, bytes + seconds * bandwidth);
    }
    filled_ms = std::max<std::uint64_t>(now_ms, 1);
  }
};

}  // namespace tern::proto
