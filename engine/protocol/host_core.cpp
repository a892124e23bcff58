// The sans-I/O ENet 1.3 host. Behaviour follows libenet 1.3.17 where it is observable on the
// wire (handshake, sessions, acknowledgements, windows, fragments, throttle, timeouts); the
// bookkeeping differs where ENet scans: peers are found by address, peers with work are kept
// on a dirty list, and timers live in a timing wheel, so an idle peer costs nothing until its
// timer.

#include "core_impl.hpp"

// The modules, one translation unit (README.md, "Layout").
#include "ack_ledger.cpp"
#include "blocks.cpp"
#include "command_table.cpp"
#include "congestion_control.cpp"
#include "congestion_window.cpp"
#include "datagram_builder.cpp"
#include "delivery_modes.cpp"
#include "disconnect.cpp"
#include "discovery.cpp"
#include "extensions.cpp"
#include "fast_retransmit.cpp"
#include "handshake.cpp"
#include "idle_pings.cpp"
#include "intake.cpp"
#include "nodelay.cpp"
#include "peer_blocks.cpp"
#include "peer_directory.cpp"
#include "pmtu.cpp"
#include "reassembly.cpp"
#include "receive.cpp"
#include "redundancy.cpp"
#include "retransmit.cpp"
#include "secure_sessions.cpp"
#include "selective_acks.cpp"
#include "send_queue.cpp"
#include "throttle.cpp"
#include "timers.cpp"

#include <cstring>

namespace tern::proto {

// Built at compile time, once every part has defined what it installs.
constinit const HostCore::Impl::CommandRules HostCore::Impl::kCommandRules = make_command_rules();

// header -> route -> checksum -> each command through its rule (command_table.cpp).
inline void HostCore::Impl::on_datagram(std::uint64_t now_us, const Endpoint& from,
                                        std::span<const std::byte> bytes) {
  now_ms = now_us / 1000;
  this->now_us = now_us;
  ++counters.datagrams_in;
  counters.bytes_in += bytes.size();
  DecodedHeader dh;
  Drop why = Drop::count_;
  // Secure sessions mark a sealed datagram with ENet's compressed bit (secure_sessions.cpp).
  datagram_sealed = false;
  const bool sealed = looks_sealed(bytes);
  if (!(sealed ? decode_sealed_header(bytes, dh, why)
               : decode_header(bytes, config.checksum, dh, why))) {
    counters.drops.add(why);
    return;
  }
  Peer* peer = nullptr;
  bool skip_ack = false;  // the acknowledgement that just made the peer (handshake.cpp)
  if (dh.header.peer_id != kMaxPeerId) {
    peer = route_datagram(from, dh.header, why);
    if (peer == nullptr) {
      if (why == Drop::unknown_peer && acknowledge_repeated_disconnect(from, dh, bytes)) {
        counters.drops.add(why);  // it names no connection, answered or not
        return;
      }
      // Perhaps a handshake's answer: it names the peer ID our VERIFY_CONNECT promised.
      if (why != Drop::unknown_peer || !half_open.allocated()) {
        counters.drops.add(why);
        return;
      }
      peer = unverified_datagram(from, dh, bytes, skip_ack);
      if (peer == nullptr) return;
    } else if ((sealed || peer->secure) && !peer_datagram_sealed(*peer, dh, sealed, bytes)) {
      return;
    }
  } else if (sealed) {
    counters.drops.add(Drop::compressed);  // a CONNECT is never sealed
    return;
  } else if (is_unconnected_ext(bytes, dh)) {
    unconnected_datagram(now_us, from, dh, bytes);
    return;
  } else if (config.verify_before_peer) {
    stranger_datagram(from, dh, bytes);
    return;
  }
  if (!skip_ack && config.checksum &&
      !verify_checksum(bytes, dh, peer != nullptr ? peer->connect_id : 0)) {
    counters.drops.add(Drop::bad_checksum);
    return;
  }
  if (peer != nullptr) {
    count(*peer, kDatagramsReceived, 1);
    count(*peer, kBytesReceived, bytes.size());
  }
  CommandDecoder decoder(bytes, dh.size);
  Command cmd;
  while (true) {
    Arrival arrival{dh.header.sent_time};
    if (!decoder.next(cmd, arrival.why)) {
      if (!decoder.at_end()) counters.drops.add(arrival.why);
      break;
    }
    ++counters.commands_in;
    const auto number = static_cast<std::size_t>(cmd.type());
    const CommandRule& rule = kCommandRules[number < kCommandNumbers ? number : 0];
    Handled result = Handled::stop;
    if (skip_ack && cmd.type() == Cmd::acknowledge && cmd.channel_id == kSystemChannel) {
      skip_ack = false;  // it acknowledged a VERIFY_CONNECT that was never queued
      continue;
    }
    if (cmd.type() == Cmd::connect) {
      // It opens a connection: a datagram that already names one cannot carry it.
      if (peer != nullptr) {
        arrival.why = Drop::wrong_state;
      } else if ((peer = handle_connect(from, cmd, arrival.why)) != nullptr) {
        result = Handled::ok;
      }
    } else if (peer == nullptr) {
      arrival.why = Drop::unknown_peer;
    } else {
      result = dispatch(*peer, cmd, arrival);
    }
    if (result == Handled::stop) {
      if (arrival.why != Drop::count_) counters.drops.add(arrival.why);
      break;
    }
    if (result == Handled::withheld) continue;
    if (peer->state == PeerState::disconnected) break;  // reset by a handler
    if (cmd.needs_ack() && rule.acknowledged) {
      if (!dh.header.has_sent_time) break;
      acknowledge_if_asked(*peer, cmd, dh.header.sent_time);
    }
  }
  if (peer != nullptr && peer->state != PeerState::disconnected) after_datagram(*peer);
}

// The connection a header names, or null (why says why) when it names none that may send to us.
// Address, port and peer ID together name the connection; a datagram whose three do not match
// one (a forged or stale peer ID included) belongs to none.
inline Peer* HostCore::Impl::route_datagram(const Endpoint& from, const Header& header, Drop& why) {
  Peer* peer = route(from, header.peer_id);
  if (peer == nullptr || peer->state == PeerState::disconnected ||
      peer->state == PeerState::zombie) {
    why = Drop::unknown_peer;
    return nullptr;
  }
  if (peer->outgoing_peer_id < kMaxPeerId && header.session != peer->incoming_session) {
    why = Drop::bad_session;
    return nullptr;
  }
  return peer;
}

// What a datagram's commands leave to do for the peer: the extensions' turn after its acks,
// holding or sending acks, and its timer.
inline void HostCore::Impl::after_datagram(Peer& p) {
  p.heard_since_timeout = true;
  after_acks(p);
  if (holds_acks(p)) {
    if (p.queues->acks_due == 0) p.queues->acks_due = now_ms + config.ack_delay_ms;
  } else if (p.has_queued()) {
    mark_dirty(p);
  }
  release_queues_if_idle(p);
  schedule(p);
}

// HostConfig::ack_delay_ms: acknowledgements with nothing else to send to a connected peer
// wait (up to the delay) for a command to ride with. Handshake and disconnect acks never
// wait, and neither do acks for a peer that is dirty anyway.
inline bool HostCore::Impl::holds_acks(const Peer& p) const {
  return config.ack_delay_ms != 0 && p.state == PeerState::connected && !p.nodelay_agreed &&
         !p.dirty && p.has_acks() && p.queues->outgoing_reliable.empty() &&
         p.queues->outgoing_unreliable.empty();
}

// A flush after a full receive pass visits hundreds of peers, and by then the commands the
// pass queued for each have left the cache: the first touch of every peer's queue was a miss
// that stalled the loop (a sixth of a busy relay's time). Reaching a peer's queue heads is
// three dependent loads (the peer, its queues, the commands at their ends), so each is asked
// for a visit before it is needed: the peer three visits ahead, its queues two, the commands
// one.
inline void HostCore::Impl::prefetch_dirty(std::size_t at) {
  constexpr std::size_t kPeerAhead = 3;
  if (at + kPeerAhead < dirty.size()) {
    const auto* bytes = reinterpret_cast<const std::byte*>(&slots[dirty[at + kPeerAhead]]);
    for (std::size_t off = 0; off < sizeof(Peer); off += 64) detail::prefetch_line(bytes + off);
    detail::prefetch_line(bytes + sizeof(Peer) - 1);
  }
  if (at + 2 < dirty.size()) {
    const Peer& p = slots[dirty[at + 2]];
    if (p.queues != nullptr) detail::prefetch_line(p.queues);
    if (p.channel_store != nullptr) detail::prefetch_line(p.channel_store);
  }
  if (at + 1 < dirty.size()) {
    const Peer& p = slots[dirty[at + 1]];
    if (p.queues != nullptr) {
      detail::prefetch_line(p.queues->outgoing_reliable.front());
      detail::prefetch_line(p.queues->outgoing_unreliable.front());
      detail::prefetch_line(p.queues->acks.front());
      detail::prefetch_line(p.queues->sent_reliable.back());  // what the first send links to
    }
  }
}

inline std::size_t HostCore::Impl::flush(std::uint64_t now_us, std::span<OutDatagram> out) {
  now_ms = now_us / 1000;
  this->now_us = now_us;
  releases.flush();
  fire_timers();
  bandwidth_throttle();
  std::size_t n = 0;
  while (dirty_cursor < dirty.size()) {
    prefetch_dirty(dirty_cursor);
    const std::uint32_t slot = dirty[dirty_cursor];
    Peer& p = slots[slot];
    if (!p.dirty || p.state == PeerState::disconnected) {
      p.dirty = false;
      ++dirty_cursor;
      continue;
    }
    if (n == out.size()) return n;  // resume with this peer on the next call
    bool more = run_timers(p);
    while (more) {
      if (n == out.size()) return n;
      if (p.state == PeerState::disconnected) break;
      if (build_datagram(p, out[n], more)) ++n;
    }
    if (p.state != PeerState::disconnected) n += extension_datagrams(p, out.subspan(n));
    p.dirty = false;
    p.timer_due = false;
    if (p.state != PeerState::disconnected) {
      release_queues_if_idle(p);
      schedule(p);
    }
    ++dirty_cursor;
  }
  dirty.clear();
  dirty_cursor = 0;
  // Replies to sources without a peer after the peers' own datagrams: under a connect flood
  // they are most of the batch, and established peers' traffic should not wait behind them.
  while (!farewells.empty() && n < out.size()) {
    const Farewell& f = farewells.back();
    out[n].to = f.to;
    out[n].offset = 0;
    out[n].size = f.size;
    std::memcpy(out[n].bytes.data(), f.bytes.data(), f.size);
    ++n;
    ++counters.datagrams_out;
    counters.bytes_out += f.size;
    farewells.pop_back();
  }
  n += flush_discovery(out.subspan(n));
  return n;
}

inline bool HostCore::Impl::poll_event(Event& out) {
  if (!events.pop(out)) return false;
  if (out.type == EventType::receive) counters.buffered_bytes -= out.packet.size();
  return true;
}

// ---- per-channel switches ----------------------------------------------------------------

ChannelSwitches channel_switches(std::span<const ChannelRule> rules) {
  ChannelSwitches s;
  const auto set = [](ChannelSet& target, const ChannelMask& channels, bool on) {
    for (std::size_t w = 0; w < target.size(); ++w) {
      target[w] = on ? target[w] | channels[w] : target[w] & ~channels[w];
    }
  };
  for (const ChannelRule& r : rules) {
    const ChannelOptions& o = r.options;
    set(s.no_fast_retransmit, r.channels, !o.fast_retransmit);
    set(s.no_nodelay, r.channels, !o.nodelay);
    set(s.no_redundancy, r.channels, !o.redundancy);
    set(s.no_congestion_control, r.channels, !o.congestion_control);
    set(s.no_express, r.channels, !o.cc_express);
    set(s.no_congestion_window, r.channels, !o.congestion_window);
    set(s.no_delivery_modes, r.channels, !o.delivery_modes);
    set(s.priority_high, r.channels,
        o.priority == Priority::high || o.priority == Priority::immediate);
    set(s.priority_low, r.channels, o.priority == Priority::low);
  }
  return s;
}

// ---- HostCore forwarding ------------------------------------------------------------------

HostCore::HostCore(const HostConfig& config) : impl_(std::make_unique<Impl>(config)) {}
HostCore::~HostCore() = default;

void HostCore::on_datagram(std::uint64_t now_us, const Endpoint& from,
                           std::span<const std::byte> bytes) {
  impl_->on_datagram(now_us, from, bytes);
}

PeerHandle HostCore::connect(std::uint64_t now_us, const Endpoint& to, std::size_t channel_count,
                             std::uint32_t data) {
  return impl_->connect(now_us, to, channel_count, data);
}

// Without a priority, the channel's default level (HostConfig::channels).
SendResult HostCore::send(PeerHandle peer, std::uint8_t channel, Delivery delivery,
                          Packet payload) {
  const Priority level = impl_->channel_priority(channel);
  if (level != Priority::medium) {
    return impl_->send_at(peer, channel, delivery, std::move(payload), level, nullptr);
  }
  return impl_->send(peer, channel, delivery, std::move(payload));
}

SendResult HostCore::send_with_receipt(PeerHandle peer, std::uint8_t channel, Delivery delivery,
                                       Packet payload, std::uint32_t receipt) {
  const Priority level = impl_->channel_priority(channel);
  if (level != Priority::medium) {
    return impl_->send_at(peer, channel, delivery, std::move(payload), level, &receipt);
  }
  return impl_->send_with_receipt(peer, channel, delivery, std::move(payload), receipt);
}

SendResult HostCore::send(PeerHandle peer, std::uint8_t channel, Delivery delivery, Packet payload,
                          Priority priority) {
  return impl_->send_at(peer, channel, delivery, std::move(payload), priority, nullptr);
}

SendResult HostCore::send_with_receipt(PeerHandle peer, std::uint8_t channel, Delivery delivery,
                                       Packet payload, std::uint32_t receipt, Priority priority) {
  return impl_->send_at(peer, channel, delivery, std::move(payload), priority, &receipt);
}

SendResult HostCore::send_block(PeerHandle peer, std::uint8_t channel, Packet block) {
  return impl_->send_block(peer, channel, std::move(block));
}

bool HostCore::block_in_flight(PeerHandle peer, std::uint8_t channel) const {
  const Peer* p = impl_->find(peer);
  return p != nullptr && Impl::block_out(*p, channel) != nullptr;
}

SendResult HostCore::send(PeerHandle peer, std::uint8_t channel, Delivery delivery,
                          std::span<const std::byte> payload) {
  Peer* p = impl_->find(peer);
  if (p == nullptr || p->state != PeerState::connected) return SendResult::not_connected;
  if (channel >= p->channel_count) return SendResult::bad_channel;
  if (payload.size() > impl_->config.max_packet_size) return SendResult::too_large;
  return send(peer, channel, delivery, Packet::copy_of(payload));
}

std::size_t HostCore::send_many(std::span<const PeerHandle> peers, std::uint8_t channel,
                                Delivery delivery, const Packet& payload, PeerHandle skip,
                                std::size_t* deepest) {
  std::uint32_t n = 0;
  for (const PeerHandle& to : peers) n += to == skip ? 0 : 1;
  Packet::Shares shares(payload, n);
  std::size_t accepted = 0;
  impl_->sending_priority = impl_->channel_priority(channel);
  for (const PeerHandle& to : peers) {
    if (to == skip) continue;
    Peer* p = impl_->find(to);
    if (p == nullptr) continue;  // its share goes back when `shares` ends
    if (impl_->send(*p, channel, delivery, shares.take()) == SendResult::ok) ++accepted;
    if (deepest != nullptr && p->queues != nullptr) {
      *deepest = std::max(*deepest, p->queues->queued_bytes);
    }
  }
  impl_->sending_priority = Priority::medium;
  return accepted;
}

void HostCore::shed_connects(bool on) { impl_->shedding_connects = on; }

void HostCore::input_read_until(std::uint64_t now_us) { impl_->input_read_ms = now_us / 1000; }

void HostCore::hold_intake(PeerHandle peer, bool held) {
  Peer* p = impl_->find(peer);
  if (p == nullptr || p->intake_held == held) return;
  if (held) {
    p->intake_held = true;
  } else {
    impl_->release_intake(*p);
  }
}

bool HostCore::intake_held(PeerHandle peer) const {
  const Peer* p = impl_->find(peer);
  return p != nullptr && p->intake_held;
}

std::size_t HostCore::queued_bytes(PeerHandle peer) const {
  const Peer* p = impl_->find(peer);
  return p != nullptr && p->queues != nullptr ? p->queues->queued_bytes : 0;
}

bool HostCore::ban(const Endpoint& address, std::uint64_t until_us, unsigned prefix_bits) {
  const Endpoint k = proto::SourceGuard::ban_key(address, prefix_bits);
  return impl_->guard.ban(k, impl_->source_hash(k), until_us / 1000, impl_->config.ban_capacity,
                          impl_->now_ms);
}

void HostCore::unban(const Endpoint& address, unsigned prefix_bits) {
  const Endpoint k = proto::SourceGuard::ban_key(address, prefix_bits);
  impl_->guard.unban(k, impl_->source_hash(k));
}

bool HostCore::banned(const Endpoint& address, std::uint64_t now_us) const {
  return impl_->guard.covers(address, now_us / 1000,
                             [this](const Endpoint& k) { return impl_->source_hash(k); });
}

std::vector<HostCore::BanEntry> HostCore::bans(std::uint64_t now_us) const {
  std::vector<BanEntry> out;
  impl_->guard.for_each_ban(now_us / 1000, [&](const Endpoint& key, std::uint64_t until_ms) {
    Endpoint a = key;
    a.port = 0;
    out.push_back(BanEntry{a, proto::SourceGuard::key_bits(key), until_ms * 1000});
  });
  return out;
}

void HostCore::disconnect(PeerHandle peer, std::uint32_t data) {
  if (Peer* p = impl_->find(peer)) impl_->start_disconnect(*p, data);
}

void HostCore::disconnect_now(PeerHandle peer, std::uint32_t data) {
  if (Peer* p = impl_->find(peer)) impl_->disconnect_now(*p, data);
}

void HostCore::disconnect_later(PeerHandle peer, std::uint32_t data) {
  if (Peer* p = impl_->find(peer)) impl_->disconnect_later(*p, data);
}

void HostCore::reset(PeerHandle peer) {
  if (Peer* p = impl_->find(peer)) impl_->reset_peer(*p);
}

void HostCore::ping(PeerHandle peer) {
  Peer* p = impl_->find(peer);
  if (p == nullptr || p->state != PeerState::connected) return;
  Command cmd;
  cmd.command = static_cast<std::uint8_t>(Cmd::ping) | kFlagAcknowledge;
  impl_->queue_system(*p, cmd);
}

void HostCore::configure_throttle(PeerHandle peer, std::uint32_t interval_ms,
                                  std::uint32_t acceleration, std::uint32_t deceleration) {
  Peer* p = impl_->find(peer);
  if (p == nullptr) return;
  impl_->set_throttle_settings(*p, interval_ms, acceleration, deceleration);
  if (p->state != PeerState::connected) return;
  Command cmd;
  cmd.command = static_cast<std::uint8_t>(Cmd::throttle_configure) | kFlagAcknowledge;
  cmd.throttle.interval = interval_ms;
  cmd.throttle.acceleration = acceleration;
  cmd.throttle.deceleration = deceleration;
  impl_->queue_system(*p, cmd);
}

void HostCore::configure_timeouts(PeerHandle peer, std::uint32_t limit, std::uint32_t minimum_ms,
                                  std::uint32_t maximum_ms) {
  Peer* p = impl_->find(peer);
  if (p == nullptr) return;
  const HostConfig& cfg = impl_->config;
  impl_->set_setting(*p, &PeerExtra::timeout_limit, limit != 0 ? limit : kTimeoutLimit,
                     cfg.timeout_limit);
  impl_->set_setting(*p, &PeerExtra::timeout_minimum,
                     minimum_ms != 0 ? minimum_ms : kTimeoutMinimum, cfg.timeout_minimum_ms);
  impl_->set_setting(*p, &PeerExtra::timeout_maximum,
                     maximum_ms != 0 ? maximum_ms : kTimeoutMaximum, cfg.timeout_maximum_ms);
}

void HostCore::set_ping_interval(PeerHandle peer, std::uint32_t interval_ms) {
  Peer* p = impl_->find(peer);
  if (p == nullptr) return;
  impl_->set_setting(*p, &PeerExtra::ping_interval, interval_ms != 0 ? interval_ms : kPingInterval,
                     impl_->config.ping_interval_ms);
  impl_->schedule(*p);
}

void HostCore::set_bandwidth_limit(std::uint32_t incoming, std::uint32_t outgoing) {
  impl_->config.incoming_bandwidth = incoming;
  impl_->config.outgoing_bandwidth = outgoing;
  impl_->recalculate_bandwidth_limits = true;
}

void HostCore::set_discovery_info(std::span<const std::byte> info) {
  impl_->set_discovery_info(info);
}

void HostCore::set_discovery(bool on) { impl_->config.discovery = on; }

std::uint32_t HostCore::discover(std::uint64_t now_us, const Endpoint& to, std::size_t info_room) {
  return impl_->discover(now_us, to, info_room);
}

bool HostCore::poll_discovery(DiscoveryAnswer& out) { return impl_->poll_discovery(out); }

std::size_t HostCore::flush(std::uint64_t now_us, std::span<OutDatagram> out) {
  return impl_->flush(now_us, out);
}

bool HostCore::poll_event(Event& out) { return impl_->poll_event(out); }

std::uint64_t HostCore::next_deadline_us() const { return impl_->next_deadline_us(); }

bool HostCore::peer_stats(PeerHandle peer, PeerStats& out) const {
  const Peer* p = impl_->find(peer);
  if (p == nullptr) return false;
  out = PeerStats{};
  out.datagrams_sent = Impl::stat(*p, kDatagramsSent);
  out.datagrams_received = Impl::stat(*p, kDatagramsReceived);
  out.bytes_sent = Impl::stat(*p, kBytesSent);
  out.bytes_received = Impl::stat(*p, kBytesReceived);
  out.reliable_retransmits = Impl::stat(*p, kReliableRetransmits);
  out.messages_sent = Impl::stat(*p, kMessagesSent);
  out.messages_received = Impl::stat(*p, kMessagesReceived);
  out.rtt_ms = p->rtt;
  out.rtt_variance_ms = p->rtt_variance;
  out.lowest_rtt_ms = p->lowest_rtt;
  out.packet_loss = p->packet_loss;
  out.packet_loss_variance = p->packet_loss_variance;
  out.packet_throttle = p->packet_throttle;
  out.packet_throttle_limit = p->packet_throttle_limit;
  out.mtu = p->mtu;
  out.window_size = p->window_size;
  out.channel_count = p->channel_count;
  out.selective_acks = p->selective_acks;
  out.blocks = p->blocks;
  out.nodelay = p->nodelay_agreed;
  out.delivery_modes = p->delivery_modes;
  out.redundancy = p->redundancy;
  out.path_mtu = p->pmtu;
  out.path_mtu_searching =
      p->pmtu && p->extra != nullptr && !p->extra->pmtu_recheck && p->extra->pmtu_due_ms != 0;
  out.redundancy_k = impl_->redundancy_k(*p);
  out.redundancy_loss = Impl::redundancy_loss(*p);
  out.congestion_control = p->congestion_control;
  if (const CongestionState* m = Impl::cc_model(*p)) {
    const CongestionState& cc = *m;
    out.cc_bandwidth = cc.bandwidth;
    out.cc_min_rtt_ms = cc.min_rtt_ms;
    out.cc_cwnd = cc.cwnd;
    out.cc_pacing_rate = cc.pacing_rate;
  }
  out.ping_interval_ms = impl_->ping_interval(*p);
  out.timeout_limit = impl_->timeout_limit(*p);
  out.timeout_minimum_ms = impl_->timeout_minimum(*p);
  out.timeout_maximum_ms = impl_->timeout_maximum(*p);
  out.throttle_interval_ms = impl_->throttle_interval(*p);
  out.throttle_acceleration = impl_->throttle_acceleration(*p);
  out.throttle_deceleration = impl_->throttle_deceleration(*p);
  if (const PeerQueues* q = p->queues) {
    out.queued_bytes = q->queued_bytes;
    out.reliable_in_transit = q->reliable_data_in_transit;
    out.queued_outgoing =
        static_cast<std::uint32_t>(q->outgoing_reliable.size() + q->outgoing_unreliable.size());
  }
  return true;
}

PeerState HostCore::peer_state(PeerHandle peer) const {
  const Peer* p = impl_->find(peer);
  return p != nullptr ? p->state : PeerState::disconnected;
}

std::optional<Endpoint> HostCore::peer_address(PeerHandle peer) const {
  const Peer* p = impl_->find(peer);
  if (p == nullptr) return std::nullopt;
  return p->address;
}

std::uint32_t HostCore::peer_connect_data(PeerHandle peer) const {
  const Peer* p = impl_->find(peer);
  return p != nullptr ? p->connect_data : 0;
}

std::size_t HostCore::peer_count() const { return impl_->peer_count; }
const HostCounters& HostCore::counters() const { return impl_->counters; }
const HostConfig& HostCore::config() const { return impl_->config; }
PeerHandle HostCore::connect_secure(std::uint64_t now_us, const Endpoint& to,
                                    std::size_t channel_count, std::uint32_t data,
                                    std::span<const std::uint8_t> sealed_token,
                                    const sec::Key& client_to_server,
                                    const sec::Key& server_to_client,
                                    const std::array<std::uint8_t, 16>& salt) {
  return impl_->connect_secure(now_us, to, channel_count, data, sealed_token, client_to_server,
                               server_to_client, salt);
}

void HostCore::set_unix_time(std::uint64_t now_us, std::uint64_t unix_s) {
  impl_->unix_offset_us =
      static_cast<std::int64_t>(unix_s * 1000000) - static_cast<std::int64_t>(now_us);
}

bool HostCore::peer_secure(PeerHandle peer) const {
  const Peer* p = impl_->find(peer);
  return p != nullptr && p->secure;
}

bool HostCore::peer_secure_aes(PeerHandle peer) const {
  const Peer* p = impl_->find(peer);
  return p != nullptr && p->secure && p->extra->secure->aes != nullptr;
}

std::uint64_t HostCore::peer_client_id(PeerHandle peer) const {
  const Peer* p = impl_->find(peer);
  return p != nullptr && p->secure && p->accepted ? p->extra->secure->client_id : 0;
}

std::span<const std::uint8_t> HostCore::peer_user_data(PeerHandle peer) const {
  const Peer* p = impl_->find(peer);
  if (p == nullptr || !p->secure || !p->accepted) return {};
  const PeerSecure& s = *p->extra->secure;
  return std::span<const std::uint8_t>(s.user_data.data(), s.user_data_len);
}

std::size_t HostCore::sizeof_peer() { return sizeof(Peer); }

}  // namespace tern::proto
