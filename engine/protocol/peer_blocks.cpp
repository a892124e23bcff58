// The protocol core: side blocks: queues, channels, extra settings, taken on first use and returned
// when idle. Part of host_core.cpp's translation unit (see README.md).
#include "core_impl.hpp"

namespace tern::proto {

// Returns the queues block once nothing is queued, in flight, unacknowledged or timing out.
inline void HostCore::Impl::release_queues_if_idle(Peer& p) {
  PeerQueues* q = p.queues;
  if (q != nullptr && q->outgoing_reliable.empty() && q->outgoing_unreliable.empty() &&
      q->sent_reliable.empty() && q->acks.empty() && q->earliest_timeout == 0 &&
      !extension_holds_queues(*q)) {
    if (q->wide_channels != 0) for_each_channel(p, [this](Channel& ch) { release_wide(ch); });
    out_runs.release(q->out_run);
    queue_pool.put(q);
    p.queues = nullptr;
  }
}

// Only once nothing is in flight on the channel: its wide slots are all empty.
inline void HostCore::Impl::release_wide(Channel& ch) {
  if (ch.wide != nullptr) {
    assert(ch.wide->empty());
    wide_pool.put(ch.wide);
    ch.wide = nullptr;
  }
}

inline PeerExtra& HostCore::Impl::extra(Peer& p) {
  if (p.extra == nullptr) {
    PeerExtra* e = extra_pool.get();
    e->ping_interval = config.ping_interval_ms;
    e->timeout_limit = config.timeout_limit;
    e->timeout_minimum = config.timeout_minimum_ms;
    e->timeout_maximum = config.timeout_maximum_ms;
    e->throttle_interval = config.throttle_interval_ms;
    e->throttle_acceleration = config.throttle_acceleration;
    e->throttle_deceleration = config.throttle_deceleration;
    p.extra = e;
  }
  return *p.extra;
}

Channel& HostCore::Impl::first_use_of_channel(Peer& p, std::uint8_t id) {
  if (p.channel_count == 1) {
    if (p.channel_store == nullptr) p.channel_store = channel_pool.get();
    return *static_cast<Channel*>(p.channel_store);
  }
  if (p.channel_store == nullptr) p.channel_store = new Channel*[p.channel_count]();
  Channel*& ch = static_cast<Channel**>(p.channel_store)[id];
  if (ch == nullptr) ch = channel_pool.get();
  return *ch;
}

// Frees every channel (their queues must be empty) and sets the new count.
inline void HostCore::Impl::reset_channels(Peer& p, std::uint32_t count) {
  for_each_channel(p, [this](Channel& ch) {
    release_wide(ch);
    channel_pool.put(&ch);
  });
  if (p.queues != nullptr) p.queues->wide_channels = 0;
  if (p.channel_count > 1) delete[] static_cast<Channel**>(p.channel_store);
  p.channel_store = nullptr;
  p.channel_count = static_cast<std::uint8_t>(count);
}

// Everything a peer holds outside its record; it is left as a freshly reset peer has it.
inline void HostCore::Impl::release_blocks(Peer& p) {
  clear_queues(p);
  if (p.queues != nullptr) {
    queue_pool.put(p.queues);
    p.queues = nullptr;
  }
  reset_channels(p, 0);
  if (p.unsequenced != nullptr) {
    unsequenced_pool.put(p.unsequenced);
    p.unsequenced = nullptr;
  }
  if (p.extra != nullptr) {
    blocks_release(p);
    extra_pool.put(p.extra);
    p.extra = nullptr;
  }
}

}  // namespace tern::proto
