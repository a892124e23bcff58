#include "sim_harness.hpp"

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <string>

namespace tern::simtest {

namespace {

constexpr std::uint64_t kNever = std::numeric_limits<std::uint64_t>::max();
// A core that keeps reporting a deadline in the past is not allowed to freeze simulated time:
// the clock still moves by ENet's timer granularity.
constexpr std::uint64_t kBusyQuantumUs = 1000;
constexpr std::size_t kBurst = 64;

// TERN_SIM_WIRE=<seconds>: from that simulated time on, print every datagram a host emits,
// command by command, to follow a replayed failure on the wire.
std::uint64_t wire_trace_from() {
  static const std::uint64_t from = [] {
    const char* text = std::getenv("TERN_SIM_WIRE");
    if (text == nullptr || *text == '\0') return kNever;
    return static_cast<std::uint64_t>(std::strtod(text, nullptr) * 1e6);
  }();
  return from;
}

void print_datagram(std::uint64_t now, const SimHost& h, const proto::OutDatagram& d) {
  proto::DecodedHeader dh;
  proto::Drop why{};
  std::string line;
  if (!proto::decode_header(d.view(), h.core->config().checksum, dh, why)) {
    line = " (undecodable header)";
  } else {
    char buf[96];
    std::snprintf(buf, sizeof buf, " peer=%u session=%u sent=%u", dh.header.peer_id,
                  dh.header.session, dh.header.has_sent_time ? dh.header.sent_time : 0u);
    line = buf;
    proto::CommandDecoder dec(d.view(), dh.size);
    proto::Command c;
    while (dec.next(c, why)) {
      std::snprintf(buf, sizeof buf, " | %s ch=%u seq=%u", proto::cmd_name(c.type()), c.channel_id,
                    c.reliable_seq);
      line += buf;
      if (c.type() == proto::Cmd::acknowledge) {
        std::snprintf(buf, sizeof buf, " acks=%u@%u", c.ack.received_reliable_seq,
                      c.ack.received_sent_time);
        line += buf;
      } else if (c.type() == proto::Cmd::send_fragment ||
                 c.type() == proto::Cmd::send_unreliable_fragment) {
        std::snprintf(buf, sizeof buf, " start=%u #%u/%u", c.fragment.start_seq,
                      c.fragment.fragment_number, c.fragment.fragment_count);
        line += buf;
      }
    }
  }
  std::printf("[wire] %.3f %s -> %s %uB%s\n", static_cast<double>(now) / 1e6, h.name.c_str(),
              d.to.to_string().c_str(), d.size, line.c_str());
}

}  // namespace

std::uint64_t seed_from_env(std::uint64_t fallback) {
  const char* text = std::getenv("TERN_SIM_SEED");
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 0);
  if (end == text || *end != '\0') {
    std::fprintf(stderr, "TERN_SIM_SEED=%s is not a number; using %" PRIu64 "\n", text, fallback);
    return fallback;
  }
  return v;
}

std::size_t SimHost::count(EventType type, PeerHandle peer) const {
  return static_cast<std::size_t>(std::count_if(log.begin(), log.end(), [&](const LoggedEvent& e) {
    return e.event.type == type && e.event.peer == peer;
  }));
}

const LoggedEvent* SimHost::first(EventType type, PeerHandle peer) const {
  for (const auto& e : log) {
    if (e.event.type == type && e.event.peer == peer) return &e;
  }
  return nullptr;
}

const LoggedEvent* SimHost::first_disconnect_from(const Endpoint& remote) const {
  for (const auto& e : log) {
    if (e.event.type == EventType::disconnect && e.event.address == remote) return &e;
  }
  return nullptr;
}

const LoggedEvent* SimHost::first_connect_from(const Endpoint& remote) const {
  for (const auto& e : log) {
    if (e.event.type == EventType::connect && e.event.address == remote) return &e;
  }
  return nullptr;
}

SimHarness::SimHarness(std::uint64_t default_seed, std::string label, bool env_overrides)
    : seed_(env_overrides ? seed_from_env(default_seed) : default_seed),
      label_(std::move(label)),
      net_(std::make_unique<drv::SimNetwork>(seed_)),
      // The test's own randomness (message sizes, pacing) is a separate stream from the
      // network's, so changing a traffic pattern does not reshuffle every loss decision.
      rng_(seed_ ^ 0xA5A5A5A5DEADBEEFull),
      batch_(kBurst) {
  if (env_overrides) {
    std::printf("[sim] %s: seed=%" PRIu64 " (set TERN_SIM_SEED to replay)\n", label_.c_str(),
                seed_);
  } else {
    std::printf("[sim] %s: seed=%" PRIu64 "\n", label_.c_str(), seed_);
  }
  std::fflush(stdout);
}

SimHarness::~SimHarness() = default;

std::string SimHarness::seed_note() const {
  return label_ + " seed=" + std::to_string(seed_) + " (TERN_SIM_SEED=" + std::to_string(seed_) +
         " replays)";
}

std::uint64_t SimHarness::now() const { return net_->now_us(); }

Endpoint SimHarness::next_address(std::uint16_t port) {
  const std::uint32_t n = next_host_++;
  return Endpoint::v4(0x0A000000u | n, port);
}

SimHost& SimHarness::add_host(std::string name, const proto::HostConfig& config,
                              std::optional<Endpoint> address) {
  auto h = std::make_unique<SimHost>();
  h->name = std::move(name);
  h->address = address ? *address : next_address();
  h->driver = net_->attach(h->address);
  h->core = std::make_unique<proto::HostCore>(config);
  hosts_.push_back(std::move(h));
  return *hosts_.back();
}

void SimHarness::remove_host(SimHost& host) {
  host.driver.reset();
  host.core.reset();
}

void SimHarness::print_summary() const {
  const auto& ns = net_->stats();
  std::printf("[sim] %s: t=%.3fs steps=%" PRIu64 " busy_steps=%" PRIu64 " net: sent=%" PRIu64
              " delivered=%" PRIu64 " lost=%" PRIu64 " dup=%" PRIu64 " reordered=%" PRIu64
              " queue_dropped=%" PRIu64 " unroutable=%" PRIu64 "\n",
              label_.c_str(), static_cast<double>(net_->now_us()) / 1e6, steps_, busy_steps_,
              ns.sent, ns.delivered, ns.lost, ns.duplicated, ns.reordered, ns.queue_dropped,
              ns.unroutable);
  for (const auto& h : hosts_) {
    if (!h->core) continue;
    const auto& c = h->core->counters();
    std::printf("[sim]   %-8s dgrams in/out=%" PRIu64 "/%" PRIu64 " msgs in/out=%" PRIu64
                "/%" PRIu64 " retransmits=%" PRIu64 " drops=%" PRIu64 " buffered=%zu\n",
                h->name.c_str(), c.datagrams_in, c.datagrams_out, c.messages_in, c.messages_out,
                c.retransmits, c.drops.total(), c.buffered_bytes);
    std::string reasons;
    for (std::size_t i = 0; i < proto::kDropCount; ++i) {
      const auto d = static_cast<proto::Drop>(i);
      if (c.drops[d] != 0)
        reasons.append(" ")
            .append(proto::drop_name(d))
            .append("=")
            .append(std::to_string(c.drops[d]));
    }
    if (!reasons.empty()) std::printf("[sim]            drops:%s\n", reasons.c_str());
    for (const auto& e : h->log) {
      if (e.event.type != EventType::disconnect) continue;
      std::printf("[sim]            disconnect at %.3fs from %s reason=%s data=%u\n",
                  static_cast<double>(e.at_us) / 1e6, e.event.address.to_string().c_str(),
                  to_string(e.event.reason), e.event.data);
    }
  }
  std::fflush(stdout);
}

void SimHarness::wake_at(std::uint64_t t_us) {
  wakes_.push_back(t_us);
  std::push_heap(wakes_.begin(), wakes_.end(), std::greater<>());
}

// One poll iteration of one host, in DESIGN §2 order.
void SimHarness::service(SimHost& h, std::uint64_t now) {
  if (!h.core) return;
  std::array<rt::RxFrame, kBurst> rx;
  for (;;) {
    const std::size_t n = h.driver->rx_burst(rx);
    for (std::size_t i = 0; i < n; ++i) h.core->on_datagram(now, rx[i].from, rx[i].bytes);
    if (n < rx.size()) break;
  }

  Event ev;
  while (h.core->poll_event(ev)) {
    if (h.on_event) h.on_event(h, ev);
    if (h.log_receives || ev.type != EventType::receive)
      h.log.push_back(LoggedEvent{now, std::move(ev)});
    ev = Event{};
  }

  std::array<rt::TxFrame, kBurst> tx;
  for (;;) {
    const std::size_t n = h.core->flush(now, batch_);
    for (std::size_t i = 0; i < n; ++i) {
      if (h.on_tx) h.on_tx(h, batch_[i]);
      if (now >= wire_trace_from()) print_datagram(now, h, batch_[i]);
      tx[i] = rt::TxFrame{batch_[i].to, batch_[i].view()};
    }
    if (n > 0) h.driver->tx_burst(std::span<const rt::TxFrame>(tx.data(), n));
    if (n < batch_.size()) break;
  }
}

void SimHarness::advance() {
  const std::uint64_t now = net_->now_us();
  const std::uint64_t delivery = net_->next_delivery_us();
  // Datagrams already due are picked up by the next step without moving the clock.
  if (delivery <= now) return;

  std::uint64_t next = now + max_step_us_;
  next = std::min(next, delivery);
  while (!wakes_.empty() && wakes_.front() <= now) {
    std::pop_heap(wakes_.begin(), wakes_.end(), std::greater<>());
    wakes_.pop_back();
  }
  if (!wakes_.empty()) next = std::min(next, wakes_.front());

  bool busy = false;
  for (const auto& h : hosts_) {
    if (!h->core) continue;
    const std::uint64_t d = h->core->next_deadline_us();
    if (d == kNever) continue;
    if (d <= now) {
      busy = true;
    } else {
      next = std::min(next, d);
    }
  }
  if (busy) {
    ++busy_steps_;
    next = std::min(next, now + kBusyQuantumUs);
  }
  net_->advance_to(std::max(next, now + 1));
}

void SimHarness::step() {
  if (before_step) before_step();
  const std::uint64_t now = net_->now_us();
  for (auto& h : hosts_) service(*h, now);
  ++steps_;
  if (after_step) after_step();
  advance();
}

bool SimHarness::run_until(const std::function<bool()>& pred, std::uint64_t max_sim_us) {
  const std::uint64_t limit = now() + max_sim_us;
  for (;;) {
    if (pred()) return true;
    if (now() >= limit) return false;
    step();
  }
}

void SimHarness::run_for(std::uint64_t sim_us) {
  const std::uint64_t end = now() + sim_us;
  wake_at(end);
  while (now() < end) step();
}

std::optional<Connection> SimHarness::connect(SimHost& client, SimHost& server,
                                              std::size_t channels, std::uint32_t data,
                                              std::uint64_t max_sim_us) {
  Connection c;
  c.client = client.core->connect(now(), server.address, channels, data);
  if (!c.client.valid()) return std::nullopt;
  const std::size_t client_mark = client.log.size();
  const std::size_t server_mark = server.log.size();
  bool client_up = false;
  bool server_up = false;
  const bool ok = run_until(
      [&] {
        for (std::size_t i = client_mark; !client_up && i < client.log.size(); ++i) {
          const Event& e = client.log[i].event;
          if (e.peer == c.client && e.type == EventType::connect) client_up = true;
          if (e.peer == c.client && e.type == EventType::disconnect) return true;
        }
        for (std::size_t i = server_mark; !server_up && i < server.log.size(); ++i) {
          const Event& e = server.log[i].event;
          if (e.type == EventType::connect && e.address == client.address) {
            c.server = e.peer;
            server_up = true;
          }
        }
        return client_up && server_up;
      },
      max_sim_us);
  if (!ok || !client_up || !server_up) return std::nullopt;
  return c;
}

}  // namespace tern::simtest
