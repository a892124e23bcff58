// tern::Host: the sans-I/O HostCore glued to one driver and one clock.
//
// A one-shard loop: service() runs the runtime's CoreIo receive and transmit steps, the ones
// every shard runs (engine/runtime/core_io.hpp), on the calling thread. All I/O buffers are
// sized once at construction; service() itself never allocates, so the per-packet path stays
// off the heap (DESIGN §2).
#include <tern/host.hpp>

#include "core_io.hpp"
#include "driver.hpp"
#include "host_core.hpp"
#include "kcp/kcp_core.hpp"
#include "mix.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>

namespace tern {

namespace {

constexpr std::uint64_t kNever = std::numeric_limits<std::uint64_t>::max();

std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) {
  return b > kNever - a ? kNever : a + b;
}

using base::mix64;

proto::HostConfig to_config(const HostOptions& o, std::uint64_t seed, const Endpoint& local) {
  proto::HostConfig c;
  c.security = static_cast<proto::Security>(o.security);
  c.secure_aes = o.secure_aes;
  for (const TokenKey& k : o.token_keys) {
    if (c.token_keys.count == c.token_keys.keys.size()) break;
    c.token_keys.keys[c.token_keys.count++] = proto::sec::TokenKey{k.id, k.key};
  }
  for (const Endpoint& e : o.secure_addresses) {
    if (c.secure_address_count == c.secure_addresses.size()) break;
    c.secure_addresses[c.secure_address_count++] = e;
  }
  if (c.secure_address_count == 0) c.secure_addresses[c.secure_address_count++] = local;
  c.peer_limit = o.peer_limit;
  c.channel_limit = std::clamp(o.channel_limit, proto::kMinChannelCount, proto::kMaxChannelCount);
  c.incoming_bandwidth = o.incoming_bandwidth;
  c.outgoing_bandwidth = o.outgoing_bandwidth;
  c.mtu = std::clamp(o.mtu, proto::kMinMtu, proto::kMaxMtu);
  c.checksum = o.checksum;
  c.max_packet_size = o.max_packet_size;
  c.max_waiting_data = o.max_waiting_data;
  c.memory_cap = o.memory_cap;
  c.max_queued = o.max_queued;
  c.ping_interval_ms = o.ping_interval_ms;
  c.timeout_limit = o.timeout_limit;
  c.timeout_minimum_ms = o.timeout_minimum_ms;
  c.timeout_maximum_ms = o.timeout_maximum_ms;
  c.selective_acks = o.selective_acks;
  c.fast_retransmit = o.fast_retransmit;
  c.congestion_window = o.congestion_window;
  c.throttle_reliable_window = o.throttle_reliable_window;
  c.nodelay = o.nodelay;
  c.nodelay_channels = o.nodelay_channels;
  c.nodelay_resend = o.nodelay_resend;
  c.delivery_modes = o.delivery_modes;
  c.redundancy = o.redundancy;
  c.redundancy_max_k = o.redundancy_max_k;
  c.redundancy_budget_percent = o.redundancy_budget_percent;
  c.redundancy_high_loss_budget_percent = o.redundancy_high_loss_budget_percent;
  c.redundancy_ack_repeats = o.redundancy_ack_repeats;
  c.blocks = o.blocks;
  c.max_block_size = o.max_block_size;
  c.block_rate = o.block_rate;
  c.congestion_control = o.congestion_control;
  c.cc_express_bytes = o.cc_express_bytes;
  c.cc_max_window = o.cc_max_window;
  c.channels = proto::channel_switches(o.channel_options);
  c.verify_before_peer = o.verify_before_peer;
  c.half_open_capacity = o.half_open_capacity;
  c.half_open_timeout_ms = o.half_open_timeout_ms;
  c.idle_ping_intervals = o.idle_ping_intervals;
  c.pmtu = o.path_mtu;
  c.pmtu_max = o.path_mtu_max;
  c.discovery = o.discovery;
  c.discovery_rate_per_address = o.discovery_rate_per_address;
  c.discovery_burst_per_address = 2 * o.discovery_rate_per_address;
  c.discovery_rate_per_prefix = o.discovery_rate_per_prefix;
  c.discovery_burst_per_prefix = 2 * o.discovery_rate_per_prefix;
  c.random_seed = seed;
  return c;
}

// A zero seed means "pick one": the clock reading and the host's own address, so two hosts
// started in the same microsecond (every host on a sim network starts at time 0) still
// differ. Real hosts add the wall clock for a different seed per run; on a simulated clock it
// is left out to keep runs reproducible.
std::uint64_t choose_seed(const HostOptions& o, rt::Clock& clock, const Endpoint& local,
                          bool wall_clock_entropy) {
  if (o.random_seed != 0) return o.random_seed;
  std::uint64_t x = mix64(clock.now_us()) ^ EndpointHash()(local);
  if (wall_clock_entropy) {
    x ^= mix64(
        static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()));
  }
  const std::uint64_t seed = mix64(x);
  return seed != 0 ? seed : 0x7465726e;  // xorshift state must not be zero
}

proto::kcp::KcpConfig to_kcp_config(const HostOptions& o, std::uint64_t seed) {
  proto::kcp::KcpConfig c;
  c.session_limit = o.peer_limit;
  c.mtu = std::clamp<std::uint32_t>(o.mtu, 100, proto::kcp::kMaxMtu);
  c.snd_wnd = o.kcp.snd_wnd;
  c.rcv_wnd = o.kcp.rcv_wnd;
  c.nodelay = o.kcp.nodelay;
  c.interval_ms = o.kcp.interval_ms;
  c.fast_resend = o.kcp.fast_resend;
  c.no_cwnd = o.kcp.no_cwnd;
  c.stream = o.kcp.stream;
  c.send_fec = o.kcp.send_fec;
  c.dead_link = o.kcp.dead_link;
  c.idle_timeout_ms = o.kcp.idle_timeout_ms;
  c.random_seed = seed;
  return c;
}

}  // namespace

struct Host::Impl {
  Impl(const proto::HostConfig& config, std::unique_ptr<rt::Driver> driver, rt::Clock& clock,
       std::unique_ptr<rt::Clock> owned_clock)
      : owned_clock_(std::move(owned_clock)),
        clock_(clock),
        driver_(std::move(driver)),
        core_(config),
        io_(core_, *driver_) {
    // Token expiry is wall time; the core keeps the offset to its own clock.
    core_.set_unix_time(
        clock_.now_us(),
        static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                       std::chrono::system_clock::now().time_since_epoch())
                                       .count()));
  }

  // The KCP personality: its core replaces the ENet one for everything the host does.
  void use_kcp(const proto::kcp::KcpConfig& config) {
    kcp_ = std::make_unique<proto::kcp::KcpCore>(config);
    kcp_io_ = std::make_unique<rt::KcpIo>(*kcp_, *driver_);
  }

  void kcp_receive() { kcp_io_->receive(clock_.now_us()); }

  void kcp_transmit() {
    const std::uint64_t now = clock_.now_us();
    driver_->set_time(now);
    kcp_io_->transmit(now);
  }

  void pump_transmit() { kcp_ ? kcp_transmit() : transmit_all(); }
  void pump_receive() { kcp_ ? kcp_receive() : receive_all(); }
  bool poll(Event& event) { return kcp_ ? kcp_->poll_event(event) : core_.poll_event(event); }
  std::uint64_t next_deadline() const {
    return kcp_ ? kcp_->next_deadline_us() : core_.next_deadline_us();
  }

  // Drains the driver into the core, a bounded number of bursts per pass.
  void receive_all() { io_.receive(clock_.now_us()); }

  // Runs the core's timers and transmits what it builds, as much as the driver has room for.
  void transmit_all() { io_.transmit(clock_.now_us()); }

  bool service(Event& event, std::chrono::microseconds timeout) {
    if (poll(event)) return true;
    const std::uint64_t wait_total =
        timeout.count() > 0 ? static_cast<std::uint64_t>(timeout.count()) : 0;
    const std::uint64_t deadline = saturating_add(clock_.now_us(), wait_total);
    for (;;) {
      // Replies the application queued while handling the previous events leave together with
      // the acknowledgements those events' datagrams asked for: one datagram instead of two
      // per reliable request/response (libenet sends the ack on its own first).
      pump_transmit();
      pump_receive();
      if (poll(event)) return true;
      pump_transmit();  // nothing for the application: acknowledgements and timers go now
      // Virtual time only moves when the owner of the simulation advances it: waiting here
      // would spin forever, so one pass is all a non-waitable driver gets.
      if (!io_.caps().waitable) return false;
      const std::uint64_t now = clock_.now_us();
      if (now >= deadline) return false;
      const std::uint64_t wake = std::min(deadline, next_deadline());
      driver_->wait(wake > now ? wake - now : 0);
    }
  }

  std::unique_ptr<rt::Clock> owned_clock_;  // set by listen(); declared first so it dies last
  rt::Clock& clock_;
  std::unique_ptr<rt::Driver> driver_;
  proto::HostCore core_;
  rt::CoreIo io_;
  std::unique_ptr<proto::kcp::KcpCore> kcp_;
  std::unique_ptr<rt::KcpIo> kcp_io_;
};

Host::Host(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Host::~Host() = default;

std::unique_ptr<Host> Host::listen(const HostOptions& options, const Endpoint& bind,
                                   std::string& error) {
  rt::DriverSpec spec;
  spec.kind = rt::DriverKind::socket;
  spec.bind = bind;
  spec.receive_buffer = options.socket_receive_buffer;
  spec.send_buffer = options.socket_send_buffer;
  spec.burst = rt::CoreIo::kBatch;
  // The factory (drivers/factory) is linked in with this library (tern_api_dep); this file
  // names no driver.
  std::unique_ptr<rt::Driver> driver = rt::open_driver(spec, error);
  if (driver == nullptr) {
    if (error.empty()) error = "cannot open a UDP socket on " + bind.to_string();
    return nullptr;
  }
  auto clock = std::make_unique<rt::SteadyClock>();
  rt::Clock& clock_ref = *clock;
  const proto::HostConfig config =
      to_config(options, choose_seed(options, clock_ref, driver->local_endpoint(), true),
                driver->local_endpoint());
  auto impl = std::make_unique<Impl>(config, std::move(driver), clock_ref, std::move(clock));
  if (options.personality == Personality::kcp)
    impl->use_kcp(to_kcp_config(options, config.random_seed));
  return std::unique_ptr<Host>(new Host(std::move(impl)));
}

std::unique_ptr<Host> Host::over(const HostOptions& options, std::unique_ptr<rt::Driver> driver,
                                 rt::Clock& clock) {
  if (driver == nullptr) return nullptr;
  const proto::HostConfig config =
      to_config(options, choose_seed(options, clock, driver->local_endpoint(), false),
                driver->local_endpoint());
  auto impl = std::make_unique<Impl>(config, std::move(driver), clock, nullptr);
  if (options.personality == Personality::kcp)
    impl->use_kcp(to_kcp_config(options, config.random_seed));
  return std::unique_ptr<Host>(new Host(std::move(impl)));
}

PeerHandle Host::connect(const Endpoint& address, std::size_t channel_count, std::uint32_t data) {
  if (impl_->kcp_) return impl_->kcp_->connect(impl_->clock_.now_us(), address, data);
  return impl_->core_.connect(impl_->clock_.now_us(), address, channel_count, data);
}

PeerHandle Host::connect_secure(const Endpoint& address, std::size_t channel_count,
                                std::uint32_t data, const ConnectToken& token) {
  if (impl_->kcp_) return PeerHandle{};
  std::array<std::uint8_t, 16> salt{};
  proto::sec::random_bytes(salt.data(), salt.size());
  return impl_->core_.connect_secure(impl_->clock_.now_us(), address, channel_count, data,
                                     token.sealed, token.client_to_server, token.server_to_client,
                                     salt);
}

bool Host::peer_secure(PeerHandle peer) const {
  return !impl_->kcp_ && impl_->core_.peer_secure(peer);
}

std::span<const std::uint8_t> Host::peer_user_data(PeerHandle peer) const {
  if (impl_->kcp_) return {};
  return impl_->core_.peer_user_data(peer);
}

SendResult Host::send(PeerHandle peer, std::uint8_t channel, Delivery delivery, Packet payload) {
  if (impl_->kcp_) return impl_->kcp_->send(peer, payload.bytes());
  return impl_->core_.send(peer, channel, delivery, std::move(payload));
}

SendResult Host::send(PeerHandle peer, std::uint8_t channel, Delivery delivery,
                      std::span<const std::byte> payload) {
  if (impl_->kcp_) return impl_->kcp_->send(peer, payload);
  return impl_->core_.send(peer, channel, delivery, payload);
}

SendResult Host::send_with_receipt(PeerHandle peer, std::uint8_t channel, Delivery delivery,
                                   Packet payload, std::uint32_t receipt, Priority priority) {
  if (impl_->kcp_) return SendResult::not_reliable;
  const SendResult r = impl_->core_.send_with_receipt(peer, channel, delivery, std::move(payload),
                                                      receipt, priority);
  if (r == SendResult::ok && priority == Priority::immediate) impl_->pump_transmit();
  return r;
}

SendResult Host::send_with_receipt(PeerHandle peer, std::uint8_t channel, Delivery delivery,
                                   Packet payload, std::uint32_t receipt) {
  if (impl_->kcp_) return SendResult::not_reliable;
  return impl_->core_.send_with_receipt(peer, channel, delivery, std::move(payload), receipt);
}

SendResult Host::send(PeerHandle peer, std::uint8_t channel, Delivery delivery, Packet payload,
                      Priority priority) {
  if (impl_->kcp_) return impl_->kcp_->send(peer, payload.bytes());
  const SendResult r = impl_->core_.send(peer, channel, delivery, std::move(payload), priority);
  if (r == SendResult::ok && priority == Priority::immediate) impl_->pump_transmit();
  return r;
}

SendResult Host::send_block(PeerHandle peer, std::uint8_t channel, Packet block) {
  if (impl_->kcp_) return impl_->kcp_->send(peer, block.bytes());
  return impl_->core_.send_block(peer, channel, std::move(block));
}

bool Host::block_in_flight(PeerHandle peer, std::uint8_t channel) const {
  return !impl_->kcp_ && impl_->core_.block_in_flight(peer, channel);
}

void Host::disconnect(PeerHandle peer, std::uint32_t data) {
  if (impl_->kcp_) return impl_->kcp_->disconnect(peer);
  impl_->core_.disconnect(peer, data);
}

void Host::disconnect_now(PeerHandle peer, std::uint32_t data) {
  if (impl_->kcp_) return impl_->kcp_->disconnect(peer);
  impl_->core_.disconnect_now(peer, data);
  // enet_peer_disconnect_now flushes at once: the peer is forgotten, so nothing later would.
  impl_->transmit_all();
}

void Host::disconnect_later(PeerHandle peer, std::uint32_t data) {
  if (impl_->kcp_) return impl_->kcp_->disconnect(peer);
  impl_->core_.disconnect_later(peer, data);
}

void Host::reset(PeerHandle peer) {
  if (impl_->kcp_) return impl_->kcp_->disconnect(peer);
  impl_->core_.reset(peer);
}

bool Host::service(Event& event, std::chrono::microseconds timeout) {
  return impl_->service(event, timeout);
}

bool Host::check_events(Event& event) { return impl_->poll(event); }

void Host::flush() { impl_->pump_transmit(); }

bool Host::peer_stats(PeerHandle peer, PeerStats& out) const {
  if (impl_->kcp_) {
    proto::kcp::KcpSessionStats k;
    if (!impl_->kcp_->session_stats(peer, k)) return false;
    out = PeerStats{};
    out.rtt_ms = k.srtt_ms;
    out.mtu = impl_->kcp_->config().mtu;
    out.window_size = k.remote_wnd;
    out.channel_count = 1;
    out.queued_bytes = k.queued_bytes;  // queued or unacknowledged
    return true;
  }
  return impl_->core_.peer_stats(peer, out);
}

PeerState Host::peer_state(PeerHandle peer) const {
  if (impl_->kcp_) {
    return impl_->kcp_->session_address(peer) ? PeerState::connected : PeerState::disconnected;
  }
  return impl_->core_.peer_state(peer);
}

Endpoint Host::peer_address(PeerHandle peer) const {
  if (impl_->kcp_) return impl_->kcp_->session_address(peer).value_or(Endpoint{});
  return impl_->core_.peer_address(peer).value_or(Endpoint{});
}

std::size_t Host::peer_count() const {
  return impl_->kcp_ ? impl_->kcp_->session_count() : impl_->core_.peer_count();
}

void Host::ban(const Endpoint& address, std::chrono::milliseconds duration) {
  const auto us = static_cast<std::uint64_t>(duration.count()) * 1000;
  impl_->core_.ban(address, impl_->clock_.now_us() + us);
}

void Host::unban(const Endpoint& address) { impl_->core_.unban(address); }

void Host::set_discovery_info(std::span<const std::byte> info) {
  impl_->core_.set_discovery_info(info);
}

std::uint32_t Host::discover(const Endpoint& address, std::size_t info_room) {
  if (impl_->kcp_) return 0;
  const std::uint32_t nonce = impl_->core_.discover(impl_->clock_.now_us(), address, info_room);
  // Sent now, so the RTT it measures starts when the ping leaves.
  impl_->transmit_all();
  return nonce;
}

bool Host::poll_discovery(DiscoveryAnswer& answer) { return impl_->core_.poll_discovery(answer); }

void Host::set_peer_timeout(PeerHandle peer, std::uint32_t limit, std::uint32_t minimum_ms,
                            std::uint32_t maximum_ms) {
  if (impl_->kcp_) return;
  impl_->core_.configure_timeouts(peer, limit, minimum_ms, maximum_ms);
}

void Host::set_peer_throttle(PeerHandle peer, std::uint32_t interval_ms, std::uint32_t acceleration,
                             std::uint32_t deceleration) {
  if (impl_->kcp_) return;
  impl_->core_.configure_throttle(peer, interval_ms, acceleration, deceleration);
}

void Host::set_peer_ping_interval(PeerHandle peer, std::uint32_t interval_ms) {
  if (impl_->kcp_) return;
  impl_->core_.set_ping_interval(peer, interval_ms);
}

HostStats Host::stats() const {
  if (impl_->kcp_) {
    const proto::kcp::KcpCounters& c = impl_->kcp_->counters();
    HostStats s;
    s.datagrams_in = c.datagrams_in;
    s.bytes_in = c.bytes_in;
    s.datagrams_out = c.datagrams_out;
    s.bytes_out = c.bytes_out;
    s.messages_in = c.messages_in;
    s.messages_out = c.messages_out;
    s.connects = c.sessions_opened;
    s.disconnects = c.sessions_closed;
    s.timeouts = c.dead_links + c.idle_timeouts;
    s.retransmits = c.retransmits + c.fast_retransmits;
    s.dropped = c.drops.total();
    s.peers = impl_->kcp_->session_count();
    for (std::size_t i = 0; i < base::kDropReasons<proto::kcp::KcpDrop>; ++i) {
      if (c.drops.by_reason[i] != 0) {
        s.drops_by_reason.emplace_back(base::drop_name(static_cast<proto::kcp::KcpDrop>(i)),
                                       c.drops.by_reason[i]);
      }
    }
    return s;
  }
  const proto::HostCounters& c = impl_->core_.counters();
  HostStats s;
  s.datagrams_in = c.datagrams_in;
  s.bytes_in = c.bytes_in;
  s.datagrams_out = c.datagrams_out;
  s.bytes_out = c.bytes_out;
  s.messages_in = c.messages_in;
  s.blocks_sent = c.blocks_sent;
  s.blocks_received = c.blocks_received;
  s.block_slices_sent = c.block_slices_sent;
  s.block_slices_resent = c.block_slices_resent;
  s.blocks_refused = c.blocks_refused;
  s.block_timeouts = c.block_timeouts;
  s.messages_out = c.messages_out;
  s.connects = c.connects;
  s.disconnects = c.disconnects;
  s.timeouts = c.timeouts;
  s.retransmits = c.retransmits;
  s.fast_retransmits = c.fast_retransmits;
  s.nodelay_resends = c.nodelay_resends;
  s.redundant_sent = c.redundant_sent;
  s.redundant_unreliable_sent = c.redundant_unreliable_sent;
  s.acks_repeated = c.acks_repeated;
  s.repeated_acks_useful = c.repeated_acks_useful;
  s.paced_datagrams = c.paced_datagrams;
  s.pacer_waits = c.pacer_waits;
  s.cwnd_limited = c.cwnd_limited;
  s.duplicates_received = c.drops.by_reason[static_cast<std::size_t>(proto::Drop::duplicate)];
  s.dropped = c.drops.total();
  s.peers = impl_->core_.peer_count();
  s.buffered_bytes = c.buffered_bytes;
  s.half_open = c.half_open;
  s.half_open_created = c.half_open_created;
  s.cookies_sent = c.cookies_sent;
  s.peers_promoted = c.peers_promoted;
  s.amplification_capped = c.amplification_capped;
  s.unverified_bytes_in = c.unverified_bytes_in;
  s.unverified_bytes_out = c.unverified_bytes_out;
  s.discovery_pings_in = c.discovery_pings_in;
  s.discovery_bytes_in = c.discovery_bytes_in;
  s.discovery_pongs_out = c.discovery_pongs_out;
  s.discovery_bytes_out = c.discovery_bytes_out;
  s.discovery_truncated = c.discovery_truncated;
  s.discovery_refused = c.discovery_refused;
  s.discovery_rate_limited = c.discovery_rate_limited;
  s.discovery_pings_out = c.discovery_pings_out;
  s.discovery_answers = c.discovery_answers;
  s.pmtu_probes_sent = c.pmtu_probes_sent;
  s.pmtu_probes_lost = c.pmtu_probes_lost;
  s.pmtu_probes_answered = c.pmtu_probes_answered;
  s.pmtu_raised = c.pmtu_raised;
  s.pmtu_lowered = c.pmtu_lowered;
  for (std::size_t i = 0; i < proto::kDropCount; ++i) {
    if (c.drops.by_reason[i] != 0) {
      s.drops_by_reason.emplace_back(proto::drop_name(static_cast<proto::Drop>(i)),
                                     c.drops.by_reason[i]);
    }
  }
  return s;
}

Endpoint Host::local_endpoint() const { return impl_->driver_->local_endpoint(); }

std::uint64_t Host::now_us() const { return impl_->clock_.now_us(); }

std::uint64_t Host::next_deadline_us() const { return impl_->next_deadline(); }

}  // namespace tern
