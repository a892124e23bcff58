// In-memory network on virtual time (DESIGN §5 fault injection, §10 sim tests).
//
// Determinism is the point: every random decision comes from one generator, drawn in a fixed
// order per datagram, and every container whose order could leak into the trace is ordered by
// (delivery time, send sequence). Hash maps are only ever looked up, never iterated.
#include "sim_network.hpp"

#include <algorithm>
#include <deque>
#include <stdexcept>
#include <unordered_map>
#include <utility>

namespace tern::drv {
namespace {

// xoshiro256** seeded through splitmix64: small, fast, and its output is fixed by the seed on
// every platform (std::uniform_*_distribution is not, across standard libraries).
class Rng {
 public:
  explicit Rng(std::uint64_t seed) {
    for (auto& word : s_) word = splitmix(seed);
  }

  std::uint64_t next() {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // True with probability p; p <= 0 never draws, so a disabled impairment costs no state.
  bool chance(double p) {
    if (p <= 0.0) return false;
    if (p >= 1.0) return true;
    return static_cast<double>(next() >> 11) * 0x1.0p-53 < p;
  }

  // Uniform in [0, bound], without modulo bias.
  std::uint64_t upto(std::uint64_t bound) {
    if (bound == 0) return 0;
    if (bound == UINT64_MAX) return next();
    const std::uint64_t range = bound + 1;
    const std::uint64_t limit = UINT64_MAX - UINT64_MAX % range;
    std::uint64_t x = next();
    while (x >= limit) x = next();
    return x % range;
  }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static std::uint64_t splitmix(std::uint64_t& state) {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

  std::uint64_t s_[4]{};
};

struct LinkKey {
  Endpoint from;
  Endpoint to;
  friend bool operator==(const LinkKey&, const LinkKey&) = default;
};

struct LinkKeyHash {
  std::size_t operator()(const LinkKey& k) const noexcept {
    const std::size_t a = EndpointHash{}(k.from);
    return a ^ (EndpointHash{}(k.to) + 0x9e3779b97f4a7c15ull + (a << 6) + (a >> 2));
  }
};

// The transmitter of one direction: what it is still serialising decides both when the next
// datagram leaves and whether the queue has room for it.
struct LinkState {
  std::uint64_t free_at_us = 0;
  std::deque<std::pair<std::uint64_t, std::size_t>> backlog;  // (finish time, bytes)
  std::uint64_t backlog_bytes = 0;
};

struct Datagram {
  std::uint64_t deliver_at_us = 0;
  std::uint64_t seq = 0;
  Endpoint from;
  Endpoint to;
  std::vector<std::byte> bytes;
};

// Heap order: earliest delivery on top, ties in send order.
struct DeliversLater {
  bool operator()(const Datagram& a, const Datagram& b) const {
    if (a.deliver_at_us != b.deliver_at_us) return a.deliver_at_us > b.deliver_at_us;
    return a.seq > b.seq;
  }
};

struct Attachment {
  SimDriver* driver = nullptr;
  std::deque<Datagram> inbox;  // due, in delivery order, not yet taken by rx_burst
};

constexpr std::uint16_t kFirstEphemeralPort = 49152;

}  // namespace

struct SimNetwork::Impl {
  explicit Impl(std::uint64_t s) : seed(s), rng(s) {}

  const LinkConditions& conditions(const LinkKey& key) const {
    const auto it = overrides.find(key);
    return it == overrides.end() ? default_link : it->second;
  }

  void schedule(std::uint64_t at, const Endpoint& from, const Endpoint& to,
                std::vector<std::byte> bytes) {
    in_flight.push_back(Datagram{at, next_seq++, from, to, std::move(bytes)});
    std::push_heap(in_flight.begin(), in_flight.end(), DeliversLater{});
  }

  // One datagram through the conditioner. Draw order is fixed: queue, loss, jitter, reorder,
  // duplicate (with its own jitter), so a trace depends only on seed and call sequence.
  void send(const Endpoint& from, const Endpoint& to, std::span<const std::byte> bytes) {
    ++stats.sent;
    const LinkKey key{from, to};
    const LinkConditions& c = conditions(key);
    if (c.down) {
      ++stats.lost;
      return;
    }
    // A link that cannot carry it (no fragmentation on the way): before the queue, no draw.
    if (c.mtu != 0 && bytes.size() > c.mtu) {
      ++stats.mtu_dropped;
      return;
    }

    std::uint64_t depart = now;
    if (c.bandwidth_bytes_per_s > 0) {
      LinkState& link = links[key];
      while (!link.backlog.empty() && link.backlog.front().first <= now) {
        link.backlog_bytes -= link.backlog.front().second;
        link.backlog.pop_front();
      }
      if (c.queue_limit_bytes > 0 && link.backlog_bytes + bytes.size() > c.queue_limit_bytes) {
        ++stats.queue_dropped;
        return;
      }
      const std::uint64_t serialise =
          (bytes.size() * 1000000ull + c.bandwidth_bytes_per_s - 1) / c.bandwidth_bytes_per_s;
      depart = std::max(now, link.free_at_us) + serialise;
      link.free_at_us = depart;
      link.backlog.emplace_back(depart, bytes.size());
      link.backlog_bytes += bytes.size();
    }

    // Loss after the queue: a datagram lost downstream still took its turn on the wire.
    if (rng.chance(c.loss)) {
      ++stats.lost;
      return;
    }
    std::uint64_t delay = c.latency_us + rng.upto(c.jitter_us);
    if (rng.chance(c.reorder)) {
      delay += c.reorder_delay_us;
      ++stats.reordered;
    }
    const bool twice = rng.chance(c.duplicate);
    std::vector<std::byte> copy(bytes.begin(), bytes.end());
    if (twice) {
      ++stats.duplicated;
      const std::uint64_t dup_delay = c.latency_us + rng.upto(c.jitter_us);
      schedule(depart + delay, from, to, copy);
      schedule(depart + dup_delay, from, to, std::move(copy));
      return;
    }
    schedule(depart + delay, from, to, std::move(copy));
  }

  // Moves every datagram that has arrived into its destination's inbox, in delivery order.
  void pump() {
    while (!in_flight.empty() && in_flight.front().deliver_at_us <= now) {
      std::pop_heap(in_flight.begin(), in_flight.end(), DeliversLater{});
      Datagram d = std::move(in_flight.back());
      in_flight.pop_back();
      const auto it = attached.find(d.to);
      if (it == attached.end()) {
        ++stats.unroutable;
        continue;
      }
      it->second.inbox.push_back(std::move(d));
    }
  }

  void detach(const Endpoint& address) {
    const auto it = attached.find(address);
    if (it == attached.end()) return;
    // Arrived but never read: the host vanished before it looked.
    stats.unroutable += it->second.inbox.size();
    attached.erase(it);
  }

  std::uint64_t seed;
  Rng rng;
  std::uint64_t now = 0;
  std::uint64_t next_seq = 0;
  LinkConditions default_link;
  std::unordered_map<LinkKey, LinkConditions, LinkKeyHash> overrides;
  std::unordered_map<LinkKey, LinkState, LinkKeyHash> links;
  std::vector<Datagram> in_flight;  // a heap under DeliversLater
  std::unordered_map<Endpoint, Attachment, EndpointHash> attached;
  SimStats stats;
};

SimNetwork::SimNetwork(std::uint64_t seed) : impl_(std::make_unique<Impl>(seed)) {}

SimNetwork::~SimNetwork() {
  // Drivers may outlive the network in a test's teardown order; they become inert.
  for (auto& [address, attachment] : impl_->attached) attachment.driver->net_ = nullptr;
}

std::uint64_t SimNetwork::now_us() { return impl_->now; }

void SimNetwork::advance_to(std::uint64_t t_us) {
  if (t_us > impl_->now) impl_->now = t_us;
  impl_->pump();
}

std::uint64_t SimNetwork::next_delivery_us() const {
  return impl_->in_flight.empty() ? UINT64_MAX : impl_->in_flight.front().deliver_at_us;
}

std::unique_ptr<SimDriver> SimNetwork::attach(const Endpoint& address) {
  Endpoint chosen = address;
  if (chosen.port == 0) {
    // Like the kernel's ephemeral range, so tests can bind "127.0.0.1:0" on either driver.
    chosen.port = kFirstEphemeralPort;
    while (impl_->attached.contains(chosen)) {
      if (chosen.port == UINT16_MAX) {
        throw std::runtime_error("sim: no free port on " + address.to_string());
      }
      ++chosen.port;
    }
  } else if (impl_->attached.contains(chosen)) {
    throw std::invalid_argument("sim: address already attached: " + chosen.to_string());
  }
  std::unique_ptr<SimDriver> driver(new SimDriver(impl_.get(), chosen));
  impl_->attached[chosen].driver = driver.get();
  return driver;
}

void SimNetwork::set_default_link(const LinkConditions& c) { impl_->default_link = c; }

void SimNetwork::set_link(const Endpoint& from, const Endpoint& to, const LinkConditions& c) {
  impl_->overrides[LinkKey{from, to}] = c;
}

const SimStats& SimNetwork::stats() const { return impl_->stats; }

std::uint64_t SimNetwork::seed() const { return impl_->seed; }

SimDriver::SimDriver(SimNetwork::Impl* net, const Endpoint& address)
    : net_(net), address_(address) {}

SimDriver::~SimDriver() {
  if (net_ != nullptr) net_->detach(address_);
}

std::size_t SimDriver::rx_burst(std::span<rt::RxFrame> out) {
  held_.clear();
  if (net_ == nullptr || out.empty()) return 0;
  net_->pump();
  auto& inbox = net_->attached.at(address_).inbox;
  const std::size_t n = std::min(out.size(), inbox.size());
  for (std::size_t i = 0; i < n; ++i) {
    Datagram& d = inbox.front();
    // Moving the vector keeps its heap buffer, so the span survives held_ growing.
    held_.push_back(std::move(d.bytes));
    out[i].from = d.from;
    out[i].bytes = std::span<const std::byte>(held_.back());
    stats_.rx_bytes += held_.back().size();
    inbox.pop_front();
  }
  stats_.rx_datagrams += n;
  net_->stats.delivered += n;
  return n;
}

std::size_t SimDriver::tx_burst(std::span<const rt::TxFrame> frames) {
  if (net_ == nullptr) {
    stats_.tx_dropped += frames.size();
    return 0;
  }
  for (const rt::TxFrame& f : frames) {
    net_->send(address_, f.to, f.bytes);
    stats_.tx_bytes += f.bytes.size();
  }
  stats_.tx_datagrams += frames.size();
  return frames.size();
}

rt::DriverCaps SimDriver::caps() const {
  rt::DriverCaps c;
  c.dual_stack = true;  // the sim routes any Endpoint, IPv4-mapped or IPv6
  c.waitable = false;
  c.max_burst = 1024;
  c.max_datagram = 65507;
  return c;
}

}  // namespace tern::drv
