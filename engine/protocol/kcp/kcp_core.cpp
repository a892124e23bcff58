#include "kcp_core.hpp"

#include "../event_ring.hpp"
#include "../intake_buckets.hpp"
#include "fec.hpp"
#include "mix.hpp"
#include "peer_table.hpp"
#include "timer_wheel.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

namespace tern::proto::kcp {
namespace {

constexpr std::uint32_t kRtoNoDelayMin = 30;
constexpr std::uint32_t kRtoMin = 100;
constexpr std::uint32_t kRtoDefault = 200;
constexpr std::uint32_t kRtoMax = 60000;
constexpr std::uint32_t kThreshInit = 2;
constexpr std::uint32_t kThreshMin = 2;
constexpr std::uint32_t kProbeInit = 7000;
constexpr std::uint32_t kProbeLimit = 120000;
constexpr std::uint32_t kAskSend = 1;
constexpr std::uint32_t kAskTell = 2;
constexpr std::uint32_t kMaxFragments = 256;  // frg is one byte
constexpr std::size_t kSegChunk = 64;
// Copies of one segment sent by fast resend at most; later losses wait for the RTO.
constexpr std::uint32_t kFastResendLimit = 5;

std::uint32_t rd32(const std::byte* p) {
  return std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 | std::uint32_t(p[2]) << 16 |
         std::uint32_t(p[3]) << 24;
}
std::uint16_t rd16(const std::byte* p) {
  return static_cast<std::uint16_t>(std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8);
}
void wr32(std::byte* p, std::uint32_t v) {
  p[0] = std::byte(v);
  p[1] = std::byte(v >> 8);
  p[2] = std::byte(v >> 16);
  p[3] = std::byte(v >> 24);
}
void wr16(std::byte* p, std::uint16_t v) {
  p[0] = std::byte(v);
  p[1] = std::byte(v >> 8);
}
// Sequence numbers and timestamps wrap at 2^32.
std::int32_t diff(std::uint32_t a, std::uint32_t b) { return static_cast<std::int32_t>(a - b); }

struct Seg {
  Seg* prev = nullptr;
  Seg* next = nullptr;
  std::uint32_t sn = 0;
  std::uint32_t ts = 0;
  std::uint32_t resendts = 0;
  std::uint32_t rto = 0;
  std::uint32_t fastack = 0;
  std::uint32_t xmit = 0;
  std::uint32_t len = 0;
  std::uint8_t frg = 0;
  std::array<std::byte, kMaxMtu - kHeaderSize> data;
};

struct SegList {
  Seg* head = nullptr;
  Seg* tail = nullptr;
  std::uint32_t n = 0;
  bool empty() const { return n == 0; }
  void push_back(Seg* s) { insert_before(nullptr, s); }
  // Before `at`, or at the end when at is null.
  void insert_before(Seg* at, Seg* s) {
    s->next = at;
    s->prev = at != nullptr ? at->prev : tail;
    (s->prev != nullptr ? s->prev->next : head) = s;
    (at != nullptr ? at->prev : tail) = s;
    ++n;
  }
  void remove(Seg* s) {
    (s->prev != nullptr ? s->prev->next : head) = s->next;
    (s->next != nullptr ? s->next->prev : tail) = s->prev;
    s->prev = s->next = nullptr;
    --n;
  }
};

// Segments come from one pool per core, grown a chunk at a time and never shrunk: after warm-up
// the per-datagram path takes and returns them without allocating.
class SegPool {
 public:
  Seg* take() {
    if (free_ == nullptr) grow();
    Seg* s = free_;
    free_ = s->next;
    s->next = nullptr;
    ++live_;
    return s;
  }
  void give(Seg* s) {
    s->prev = nullptr;
    s->next = free_;
    free_ = s;
    --live_;
  }
  void give_all(SegList& l) {
    while (l.head != nullptr) {
      Seg* s = l.head;
      l.remove(s);
      give(s);
    }
  }
  std::size_t live() const { return live_; }

 private:
  void grow() {
    chunks_.push_back(std::make_unique<Seg[]>(kSegChunk));
    Seg* c = chunks_.back().get();
    for (std::size_t i = 0; i < kSegChunk; ++i) {
      c[i].next = free_;
      free_ = &c[i];
    }
  }
  std::vector<std::unique_ptr<Seg[]>> chunks_;
  Seg* free_ = nullptr;
  std::size_t live_ = 0;
};

struct Ack {
  std::uint32_t sn;
  std::uint32_t ts;
};

struct Session {
  Endpoint addr;
  std::uint32_t conv = 0;
  std::uint32_t slot = 0;
  std::uint32_t generation = 0;
  bool live = false;
  bool announced = false;  // connect event emitted
  bool fec_seen = false;
  bool dirty = false;
  // The sender broke its fragment countdown: fragments we acknowledged can never complete a
  // message, so the session ends (end_if_broken) rather than deliver with a hole.
  bool broken = false;
  Session* dirty_next = nullptr;

  std::uint32_t snd_una = 0, snd_nxt = 0, rcv_nxt = 0;
  std::uint32_t ssthresh = kThreshInit, cwnd = 1, incr = 0, rmt_wnd = 0;
  std::int32_t rx_srtt = 0, rx_rttval = 0;
  std::uint32_t rx_rto = kRtoDefault, rx_minrto = kRtoMin;
  std::uint32_t probe = 0, ts_probe = 0, probe_wait = 0;
  std::uint32_t fec_seq = 0;
  std::uint64_t last_recv_ms = 0;
  std::uint64_t queued_bytes = 0;  // payload bytes in snd_queue and snd_buf

  // Intake: held by the application, or waiting for the rate buckets to refill (until
  // rate_ready_ms); either way whole messages wait in `pending`.
  bool held = false;
  bool rate_wait = false;
  std::uint32_t complete = 0;  // whole messages in `pending`
  IntakeBuckets intake;
  std::uint64_t rate_ready_ms = 0;

  // pending: segments received in order and not yet delivered: whole messages waiting for
  // the intake, then at most one message still missing fragments.
  SegList snd_queue, snd_buf, rcv_buf, pending;
  std::vector<Ack> acks;  // capacity fixed at 2 x rcv_wnd when the slot is first used
  std::size_t ack_count = 0;

  base::TimerNode timer;
};

}  // namespace

struct KcpCore::Impl {
  explicit Impl(const KcpConfig& c) : cfg(c), table(base::mix64(c.random_seed)) {
    cfg.mtu = std::clamp<std::uint32_t>(cfg.mtu, kHeaderSize + kFecHeaderSize + 50, kMaxMtu);
    cfg.rcv_wnd = std::clamp<std::uint32_t>(cfg.rcv_wnd, 2, 65535);
    cfg.snd_wnd = std::clamp<std::uint32_t>(cfg.snd_wnd, 1, 65535);
    cfg.interval_ms = std::clamp<std::uint32_t>(cfg.interval_ms, 1, 5000);
    cfg.dead_link = std::max<std::uint32_t>(cfg.dead_link, 1);
    cfg.fec_data_shards = std::clamp<std::uint32_t>(cfg.fec_data_shards, 1, 16);
    cfg.fec_parity_shards = std::clamp<std::uint32_t>(cfg.fec_parity_shards, 1, 16);
    if (cfg.fec_groups != 0)
      fec_cache =
          std::make_unique<FecCache>(cfg.fec_data_shards, cfg.fec_parity_shards, cfg.fec_groups);
    mss = cfg.mtu - kHeaderSize - (cfg.send_fec ? kFecHeaderSize : 0);
    if (cfg.refused_ms == 0) cfg.refused_ms = cfg.idle_timeout_ms;
    refused.resize(cfg.refused_limit);
    refused_index.reserve(cfg.refused_limit);
  }

  KcpConfig cfg;
  std::uint32_t mss;
  base::PeerTable<std::uint32_t> table;
  base::TimerWheel wheel;
  std::vector<std::unique_ptr<Session>> slots;
  std::vector<std::uint32_t> free_slots;
  std::size_t live_sessions = 0;
  SegPool pool;
  std::unique_ptr<FecCache> fec_cache;  // null: parity shards are counted and ignored
  EventRing events;
  KcpCounters counters;
  Session* dirty_head = nullptr;
  Session* dirty_tail = nullptr;
  std::uint64_t now_ms = 0;

  // Sessions the application ended, remembered for refused_ms: a ring (the oldest is forgotten
  // when it is full) and its index by session key.
  struct Refused {
    Endpoint addr;
    std::uint32_t conv = 0;
    std::uint64_t until_ms = 0;
    bool used = false;
  };
  std::vector<Refused> refused;
  std::size_t refused_next = 0;
  base::PeerTable<std::uint32_t> refused_index{base::mix64(cfg.random_seed ^ 0x7265667573656400)};

  static base::PeerKey key_of(const Endpoint& e, std::uint32_t conv) {
    return base::PeerKey(e, static_cast<std::uint16_t>(conv ^ (conv >> 16)));
  }

  void forget_refused(std::uint32_t i) {
    Refused& r = refused[i];
    if (!r.used) return;
    r.used = false;
    const base::PeerKey k = key_of(r.addr, r.conv);
    if (const std::uint32_t* at = refused_index.find(k); at != nullptr && *at == i)
      refused_index.erase(k);
  }

  void remember_refused(const Session& s) {
    if (refused.empty()) return;
    const auto i = static_cast<std::uint32_t>(refused_next);
    refused_next = (refused_next + 1) % refused.size();
    forget_refused(i);
    const base::PeerKey k = key_of(s.addr, s.conv);
    if (const std::uint32_t* at = refused_index.find(k); at != nullptr) forget_refused(*at);
    refused[i] = Refused{s.addr, s.conv, now_ms + cfg.refused_ms, true};
    refused_index.insert(k, i);
  }

  // Asked only about segments that would otherwise open a session.
  bool is_refused(const Endpoint& from, std::uint32_t conv) {
    if (refused_index.size() == 0) return false;
    const std::uint32_t* at = refused_index.find(key_of(from, conv));
    if (at == nullptr) return false;
    const std::uint32_t i = *at;
    const Refused& r = refused[i];
    if (r.conv != conv || !(r.addr == from)) return false;
    if (r.until_ms > now_ms) return true;
    forget_refused(i);
    return false;
  }

  Session* get(PeerHandle h) const {
    if (!h.valid() || h.slot >= slots.size()) return nullptr;
    Session* s = slots[h.slot].get();
    return s->live && s->generation == h.generation ? s : nullptr;
  }
  static PeerHandle handle(const Session& s) { return PeerHandle{s.slot, s.generation}; }

  void mark_dirty(Session& s) {
    if (s.dirty) return;
    s.dirty = true;
    s.dirty_next = nullptr;
    (dirty_tail != nullptr ? dirty_tail->dirty_next : dirty_head) = &s;
    dirty_tail = &s;
  }

  Session* open(std::uint64_t now_ms_, const Endpoint& addr, std::uint32_t conv) {
    if (live_sessions >= cfg.session_limit) return nullptr;
    std::uint32_t slot;
    if (!free_slots.empty()) {
      slot = free_slots.back();
      free_slots.pop_back();
    } else {
      slot = static_cast<std::uint32_t>(slots.size());
      slots.push_back(std::make_unique<Session>());
      slots.back()->acks.resize(std::size_t{cfg.rcv_wnd} * 2);
    }
    Session& s = *slots[slot];
    const std::uint32_t gen = s.generation + 1;
    std::vector<Ack> acks = std::move(s.acks);
    s.~Session();
    new (&s) Session();
    s.acks = std::move(acks);
    s.slot = slot;
    s.generation = gen;
    s.live = true;
    s.addr = addr;
    s.conv = conv;
    s.rmt_wnd = cfg.rcv_wnd;
    s.rx_minrto = cfg.nodelay != 0 ? kRtoNoDelayMin : kRtoMin;
    s.last_recv_ms = now_ms_;
    table.insert(key_of(addr, conv), slot);
    ++live_sessions;
    ++counters.sessions_opened;
    schedule(s);
    return &s;
  }

  // Forgets the session; `reason` none means no event (the application asked).
  void close(Session& s, DisconnectReason reason) {
    if (reason != DisconnectReason::none && s.announced) {
      Event& ev = events.append();
      ev.type = EventType::disconnect;
      ev.peer = handle(s);
      ev.address = s.addr;
      ev.channel = 0;
      ev.delivery = Delivery::reliable;
      ev.reason = reason;
      ev.data = s.conv;
      ev.lent = {};
    }
    table.erase(key_of(s.addr, s.conv));
    wheel.cancel(s.timer);
    pool.give_all(s.snd_queue);
    pool.give_all(s.snd_buf);
    pool.give_all(s.rcv_buf);
    pool.give_all(s.pending);
    s.queued_bytes = 0;
    s.ack_count = 0;
    s.live = false;
    // A dirty session stays on the list until flush() passes it, and its slot with it.
    if (!s.dirty) free_slots.push_back(s.slot);
    --live_sessions;
    ++counters.sessions_closed;
  }

  void announce(Session& s) {
    if (s.announced) return;
    s.announced = true;
    Event& ev = events.append();
    ev.type = EventType::connect;
    ev.peer = handle(s);
    ev.address = s.addr;
    ev.channel = 0;
    ev.delivery = Delivery::reliable;
    ev.reason = DisconnectReason::none;
    ev.data = s.conv;
    ev.lent = {};
  }

  // The next time the session needs looking at (ikcp_check's idea): its earliest resend, a
  // window probe's interval, or else its idle timeout. Acks, fast resends and new data need no
  // timer: input and send() mark the session dirty and flush() takes it at once. Waking every
  // busy session each interval instead cost a 10,000-session server most of its CPU while
  // the acks of its echoes were on their way (perf/JOURNAL.md, 2026-11-27).
  void schedule(Session& s) {
    std::uint64_t at = s.last_recv_ms + cfg.idle_timeout_ms;
    const auto cur = static_cast<std::uint32_t>(now_ms);
    for (Seg* g = s.snd_buf.head; g != nullptr; g = g->next) {
      const std::int32_t d = diff(g->resendts, cur);
      at = std::min(at, now_ms + static_cast<std::uint64_t>(std::max(d, 0)));
    }
    if ((s.rmt_wnd == 0 && !s.snd_queue.empty()) || s.probe != 0)
      at = std::min(at, now_ms + cfg.interval_ms);
    if (s.rate_wait) at = std::min(at, s.rate_ready_ms);
    s.timer.owner = &s;
    wheel.schedule(s.timer, std::max(at, now_ms + 1));
  }

  // ---- input ---------------------------------------------------------------------------

  void on_datagram(std::uint64_t now_us, const Endpoint& from, std::span<const std::byte> in) {
    now_ms = std::max(now_ms, now_us / 1000);
    ++counters.datagrams_in;
    counters.bytes_in += in.size();
    if (in.size() > kMaxMtu) return drop(KcpDrop::oversize_datagram);
    if (in.size() >= 6) {
      const std::uint16_t flag = rd16(in.data() + 4);
      if (flag == kFecParity) {
        ++counters.fec_parity_in;
        if (!fec_cache) return drop(KcpDrop::fec_parity);
        if (!fec_cache->add(from, rd32(in.data()), false, in.data() + 6, in.size() - 6,
                            [&](std::span<const std::byte> kcp) { recovered(from, kcp); }))
          drop(KcpDrop::fec_mismatch);
        return;
      }
      if (flag == kFecData) {
        if (in.size() < kFecHeaderSize) return drop(KcpDrop::fec_truncated);
        const std::uint16_t size = rd16(in.data() + 6);
        if (size < 2 || std::size_t{size} + 6 > in.size()) return drop(KcpDrop::fec_truncated);
        take_plain(from, in.subspan(kFecHeaderSize, size - 2u), true);
        if (fec_cache &&
            !fec_cache->add(from, rd32(in.data()), true, in.data() + 6, size,
                            [&](std::span<const std::byte> kcp) { recovered(from, kcp); }))
          drop(KcpDrop::fec_mismatch);
        return;
      }
    }
    take_plain(from, in, false);
  }

  void recovered(const Endpoint& from, std::span<const std::byte> kcp) {
    ++counters.fec_recovered;
    take_plain(from, kcp, true);
  }

  // One datagram's KCP segments, whatever framing they came in.
  void take_plain(const Endpoint& from, std::span<const std::byte> in, bool fec) {
    if (in.size() < kHeaderSize) return drop(KcpDrop::truncated_segment);
    // Check every segment before acting on any: a datagram is taken whole or not at all.
    const std::uint32_t conv = rd32(in.data());
    for (std::size_t off = 0; off < in.size();) {
      const std::size_t left = in.size() - off;
      if (left < kHeaderSize) return drop(KcpDrop::truncated_segment);
      const std::byte* p = in.data() + off;
      if (rd32(p) != conv) return drop(KcpDrop::wrong_conv);
      const auto cmd = static_cast<std::uint8_t>(p[4]);
      if (cmd < kCmdPush || cmd > kCmdWins) return drop(KcpDrop::bad_command);
      const std::uint32_t len = rd32(p + 20);
      if (len > kMaxMtu - kHeaderSize) return drop(KcpDrop::giant_length);
      if (len > left - kHeaderSize) return drop(KcpDrop::length_past_datagram);
      off += kHeaderSize + len;
    }

    Session* s = nullptr;
    if (const std::uint32_t* slot = table.find(key_of(from, conv)); slot != nullptr) {
      s = slots[*slot].get();
      if (s->conv != conv) {
        // Another conversation whose key folds to the same value: a new one (first PUSH sn 0)
        // replaces the old, as kcp-go's listener does for a new conv from the same address.
        const bool fresh =
            static_cast<std::uint8_t>(in[4]) == kCmdPush && rd32(in.data() + 12) == 0;
        if (!fresh) return drop(KcpDrop::wrong_conv);
        close(*s, DisconnectReason::replaced);
        s = nullptr;
      }
    }
    if (s == nullptr) {
      if (is_refused(from, conv)) return drop(KcpDrop::refused);
      const bool push = static_cast<std::uint8_t>(in[4]) == kCmdPush;
      if (!push || rd32(in.data() + 12) >= cfg.rcv_wnd) return drop(KcpDrop::unknown_session);
      s = open(now_ms, from, conv);
      if (s == nullptr) return drop(KcpDrop::session_limit);
    }
    if (fec) s->fec_seen = true;
    s->last_recv_ms = now_ms;
    announce(*s);
    input(*s, in);
    if (end_if_broken(*s)) return;
    mark_dirty(*s);
  }

  void drop(KcpDrop d) { counters.drops.add(d); }

  void shrink_buf(Session& s) {
    s.snd_una = s.snd_buf.head != nullptr ? s.snd_buf.head->sn : s.snd_nxt;
  }

  void update_rtt(Session& s, std::int32_t rtt) {
    if (s.rx_srtt == 0) {
      s.rx_srtt = rtt;
      s.rx_rttval = rtt / 2;
    } else {
      const std::int32_t delta = rtt > s.rx_srtt ? rtt - s.rx_srtt : s.rx_srtt - rtt;
      s.rx_rttval = (3 * s.rx_rttval + delta) / 4;
      s.rx_srtt = (7 * s.rx_srtt + rtt) / 8;
      if (s.rx_srtt < 1) s.rx_srtt = 1;
    }
    const std::uint64_t rto =
        static_cast<std::uint64_t>(s.rx_srtt) +
        std::max<std::uint64_t>(cfg.interval_ms, 4 * std::uint64_t(s.rx_rttval));
    s.rx_rto = static_cast<std::uint32_t>(std::clamp<std::uint64_t>(rto, s.rx_minrto, kRtoMax));
  }

  void input(Session& s, std::span<const std::byte> in) {
    const std::uint32_t cur = static_cast<std::uint32_t>(now_ms);
    const std::uint32_t prev_una = s.snd_una;
    bool have_max = false;
    std::uint32_t maxack = 0, maxack_ts = 0;
    for (std::size_t off = 0; off < in.size();) {
      const std::byte* p = in.data() + off;
      const auto cmd = static_cast<std::uint8_t>(p[4]);
      const auto frg = static_cast<std::uint8_t>(p[5]);
      const std::uint16_t wnd = rd16(p + 6);
      const std::uint32_t ts = rd32(p + 8);
      const std::uint32_t sn = rd32(p + 12);
      const std::uint32_t una = rd32(p + 16);
      const std::uint32_t len = rd32(p + 20);
      off += kHeaderSize + len;
      ++counters.segments_in;

      // An una past what was ever sent would acknowledge data that does not exist.
      if (diff(una, s.snd_nxt) > 0) {
        drop(KcpDrop::unexpected_ack);
        continue;
      }
      s.rmt_wnd = wnd;
      while (s.snd_buf.head != nullptr && diff(s.snd_buf.head->sn, una) < 0) {
        Seg* g = s.snd_buf.head;
        s.queued_bytes -= g->len;
        s.snd_buf.remove(g);
        pool.give(g);
      }
      shrink_buf(s);

      switch (cmd) {
        case kCmdAck: {
          if (diff(sn, s.snd_nxt) >= 0) {
            drop(KcpDrop::unexpected_ack);
            break;
          }
          // Below una: a late copy of an ack already taken, which a lossy path produces.
          if (diff(sn, s.snd_una) < 0) break;
          if (diff(cur, ts) >= 0) update_rtt(s, diff(cur, ts));
          for (Seg* g = s.snd_buf.head; g != nullptr; g = g->next) {
            if (g->sn == sn) {
              s.queued_bytes -= g->len;
              s.snd_buf.remove(g);
              pool.give(g);
              break;
            }
            if (diff(g->sn, sn) > 0) break;
          }
          shrink_buf(s);
          if (!have_max || diff(sn, maxack) > 0) {
            have_max = true;
            maxack = sn;
            maxack_ts = ts;
          }
          break;
        }
        case kCmdPush: {
          if (diff(sn, s.rcv_nxt + cfg.rcv_wnd) >= 0) {
            drop(KcpDrop::out_of_window);
            break;
          }
          if (frg >= cfg.rcv_wnd) {
            // A message that could never fit the window: taking it would wedge the session.
            drop(KcpDrop::bad_fragment);
            break;
          }
          if (s.ack_count < s.acks.size()) s.acks[s.ack_count++] = Ack{sn, ts};
          if (diff(sn, s.rcv_nxt) < 0) {
            drop(KcpDrop::duplicate);
            break;
          }
          take_data(s, sn, frg, p + kHeaderSize, len);
          break;
        }
        case kCmdWask: s.probe |= kAskTell; break;
        default:  // WINS: the window was taken from its header already
          break;
      }
    }
    if (have_max && cfg.fast_resend != 0) {
      // Only an ack of something sent after this segment's last copy says that copy was
      // skipped; counting older acks would resend it again for every ack still in flight.
      for (Seg* g = s.snd_buf.head; g != nullptr && diff(g->sn, maxack) < 0; g = g->next)
        if (diff(maxack_ts, g->ts) >= 0) ++g->fastack;
    }
    if (diff(s.snd_una, prev_una) > 0 && s.cwnd < s.rmt_wnd) {
      if (s.cwnd < s.ssthresh) {
        ++s.cwnd;
        s.incr += mss;
      } else {
        if (s.incr < mss) s.incr = mss;
        s.incr += (mss * mss) / s.incr + mss / 16;
        if ((s.cwnd + 1) * mss <= s.incr)
          s.cwnd = (s.incr + mss - 1) / std::max<std::uint32_t>(mss, 1);
      }
      if (s.cwnd > s.rmt_wnd) {
        s.cwnd = s.rmt_wnd;
        s.incr = s.rmt_wnd * mss;
      }
    }
  }

  void take_data(Session& s, std::uint32_t sn, std::uint8_t frg, const std::byte* data,
                 std::uint32_t len) {
    // rcv_buf is sorted by sn; arrivals are mostly at the end, so search from the tail.
    Seg* at = s.rcv_buf.tail;
    while (at != nullptr && diff(at->sn, sn) > 0) at = at->prev;
    if (at != nullptr && at->sn == sn) return drop(KcpDrop::duplicate);
    Seg* g = pool.take();
    g->sn = sn;
    g->frg = frg;
    g->len = len;
    if (len != 0) std::memcpy(g->data.data(), data, len);
    s.rcv_buf.insert_before(at != nullptr ? at->next : s.rcv_buf.head, g);
    pull_in_order(s);
    release(s);
  }

  // rcv_buf's in-order head into `pending` while the waiting messages leave room: a held
  // session's rcv_nxt stops there, so what it holds is bounded by twice its window.
  void pull_in_order(Session& s) {
    while (s.rcv_buf.head != nullptr && s.rcv_buf.head->sn == s.rcv_nxt &&
           s.pending.n < cfg.rcv_wnd) {
      Seg* h = s.rcv_buf.head;
      s.rcv_buf.remove(h);
      ++s.rcv_nxt;
      collect(s, h);
    }
  }

  // In order: a message's fragments count frg down to 0.
  void collect(Session& s, Seg* g) {
    if (s.broken || (s.pending.tail != nullptr && s.pending.tail->frg != 0 &&
                     g->frg + 1u != s.pending.tail->frg)) {
      if (!s.broken) drop(KcpDrop::bad_fragment);
      s.broken = true;
      pool.give(g);
      return;
    }
    s.pending.push_back(g);
    if (g->frg == 0) ++s.complete;
  }

  // The intake buckets, per session. False: the message waits, and rate_ready_ms says when
  // the buckets will have refilled enough.
  bool meter(Session& s, std::size_t bytes) {
    if (cfg.intake_rate == 0 && cfg.intake_bandwidth == 0) return true;
    const double rate = cfg.intake_rate;
    const double bandwidth = cfg.intake_bandwidth;
    if (s.intake.take(now_ms, rate, bandwidth, bytes)) return true;
    s.rate_ready_ms = now_ms + s.intake.ms_until_ready(rate, bandwidth, bytes);
    return false;
  }

  // A broken session ends with a reason, after whatever it completed before the break, and
  // stays refused for a while so that its next segments do not open a fresh session with a
  // hole at its start. True: `s` is gone.
  bool end_if_broken(Session& s) {
    if (!s.broken) return false;
    ++counters.protocol_errors;
    remember_refused(s);
    close(s, DisconnectReason::protocol_error);
    return true;
  }

  // Delivers the whole messages at the head of `pending` as far as the intake lets them.
  // `announce_window`: tell the sender its window reopened (stopped at 0, it would otherwise
  // find out only from its next probe, seconds later).
  void release(Session& s, bool announce_window = false) {
    bool any = false;
    while (s.complete != 0 && !s.held && !s.rate_wait) {
      std::size_t total = 0;
      for (Seg* x = s.pending.head; x != nullptr; x = x->next) {
        total += x->len;
        if (x->frg == 0) break;
      }
      if (!meter(s, total)) {
        s.rate_wait = true;
        ++counters.intake_waits;
        // flush() reschedules it, and the wheel wakes it when the buckets have refilled.
        mark_dirty(s);
        break;
      }
      deliver(s, total);
      any = true;
      // Room in `pending` again: what waited in rcv_buf behind a full one moves up.
      if (s.complete == 0) pull_in_order(s);
    }
    if (any && announce_window) {
      s.probe |= kAskTell;
      mark_dirty(s);
    }
  }

  // Emits the head message of `pending`, `total` bytes, whole.
  void deliver(Session& s, std::size_t total) {
    Packet pkt = Packet::allocate(total);
    std::byte* w = pkt.mutable_bytes().data();
    for (;;) {
      Seg* x = s.pending.head;
      if (x->len != 0) std::memcpy(w, x->data.data(), x->len);
      w += x->len;
      const bool last = x->frg == 0;
      s.pending.remove(x);
      pool.give(x);
      if (last) break;
    }
    --s.complete;
    Event& ev = events.append();
    ev.type = EventType::receive;
    ev.peer = handle(s);
    ev.address = s.addr;
    ev.channel = 0;
    ev.delivery = Delivery::reliable;
    ev.reason = DisconnectReason::none;
    ev.data = 0;
    ev.lent = {};
    ev.packet = std::move(pkt);
    ++counters.messages_in;
  }

  // ---- output --------------------------------------------------------------------------

  // Packs a session's segments into datagrams out[n], out[n+1], ...
  struct Writer {
    std::span<KcpDatagram> out;
    std::size_t n = 0;
    KcpDatagram* open = nullptr;
  };

  std::uint32_t wnd_unused(const Session& s) const {
    const std::uint32_t held = s.rcv_buf.n + s.pending.n;
    return held < cfg.rcv_wnd ? cfg.rcv_wnd - held : 0;
  }

  void close_datagram(Session& s, Writer& w) {
    if (w.open == nullptr) return;
    KcpDatagram& d = *w.open;
    if (cfg.send_fec) {
      wr32(d.bytes.data(), s.fec_seq++);
      wr16(d.bytes.data() + 4, kFecData);
      wr16(d.bytes.data() + 6, static_cast<std::uint16_t>(d.size - 6));
    }
    ++counters.datagrams_out;
    counters.bytes_out += d.size;
    ++w.n;
    w.open = nullptr;
  }

  // False when the batch is full (the caller flushes again).
  bool emit(Session& s, Writer& w, std::uint8_t cmd, std::uint8_t frg, std::uint32_t ts,
            std::uint32_t sn, const std::byte* data, std::uint32_t len) {
    const std::uint32_t need = kHeaderSize + len;
    const std::uint32_t room = cfg.mtu;
    if (w.open != nullptr && w.open->size + need > room) close_datagram(s, w);
    if (w.open == nullptr) {
      if (w.n == w.out.size()) return false;
      w.open = &w.out[w.n];
      w.open->to = s.addr;
      w.open->size = cfg.send_fec ? kFecHeaderSize : 0;
    }
    std::byte* p = w.open->bytes.data() + w.open->size;
    wr32(p, s.conv);
    p[4] = std::byte(cmd);
    p[5] = std::byte(frg);
    wr16(p + 6, static_cast<std::uint16_t>(std::min<std::uint32_t>(wnd_unused(s), 65535)));
    wr32(p + 8, ts);
    wr32(p + 12, sn);
    wr32(p + 16, s.rcv_nxt);
    wr32(p + 20, len);
    if (len != 0) std::memcpy(p + kHeaderSize, data, len);
    w.open->size += need;
    return true;
  }

  // ikcp_flush's order: acks, window probes, new segments into the window, then sends and
  // resends. Returns false when the batch filled first; what was written is accounted, so the
  // next call picks up where this one stopped.
  bool flush_session(Session& s, Writer& w) {
    const std::uint32_t cur = static_cast<std::uint32_t>(now_ms);
    std::size_t sent_acks = 0;
    for (; sent_acks < s.ack_count; ++sent_acks) {
      const Ack& a = s.acks[sent_acks];
      if (!emit(s, w, kCmdAck, 0, a.ts, a.sn, nullptr, 0)) break;
      ++counters.acks_out;
    }
    if (sent_acks != 0) {
      std::copy(s.acks.begin() + static_cast<std::ptrdiff_t>(sent_acks),
                s.acks.begin() + static_cast<std::ptrdiff_t>(s.ack_count), s.acks.begin());
      s.ack_count -= sent_acks;
    }
    if (s.ack_count != 0) return false;

    if (s.rmt_wnd == 0) {
      if (s.probe_wait == 0) {
        s.probe_wait = kProbeInit;
        s.ts_probe = cur + s.probe_wait;
      } else if (diff(cur, s.ts_probe) >= 0) {
        s.probe_wait = std::min(s.probe_wait + s.probe_wait / 2, kProbeLimit);
        s.ts_probe = cur + s.probe_wait;
        s.probe |= kAskSend;
      }
    } else {
      s.ts_probe = 0;
      s.probe_wait = 0;
    }
    if ((s.probe & kAskSend) != 0) {
      if (!emit(s, w, kCmdWask, 0, 0, 0, nullptr, 0)) return false;
      ++counters.window_probes;
      s.probe &= ~kAskSend;
    }
    if ((s.probe & kAskTell) != 0) {
      if (!emit(s, w, kCmdWins, 0, 0, 0, nullptr, 0)) return false;
      s.probe &= ~kAskTell;
    }

    std::uint32_t cwnd = std::min(cfg.snd_wnd, s.rmt_wnd);
    if (!cfg.no_cwnd) cwnd = std::min(s.cwnd, cwnd);
    while (s.snd_queue.head != nullptr && diff(s.snd_nxt, s.snd_una + cwnd) < 0) {
      Seg* g = s.snd_queue.head;
      s.snd_queue.remove(g);
      g->sn = s.snd_nxt++;
      g->ts = cur;
      g->rto = s.rx_rto;
      g->resendts = cur;
      g->fastack = 0;
      g->xmit = 0;
      s.snd_buf.push_back(g);
    }

    const std::uint32_t resent = cfg.fast_resend != 0 ? cfg.fast_resend : 0xffffffffu;
    const std::uint32_t rtomin = cfg.nodelay == 0 ? (s.rx_rto >> 3) : 0;
    bool change = false, lost = false;
    for (Seg* g = s.snd_buf.head; g != nullptr; g = g->next) {
      std::uint32_t xmit = g->xmit, rto = g->rto, resendts = g->resendts, fastack = g->fastack;
      bool send = false;
      std::uint64_t* counter = nullptr;
      if (g->xmit == 0) {
        send = true;
        xmit = 1;
        rto = s.rx_rto;
        resendts = cur + rto + rtomin;
      } else if (diff(cur, g->resendts) >= 0) {
        send = true;
        ++xmit;
        if (cfg.nodelay == 0) {
          rto += std::max(rto, s.rx_rto);
        } else {
          const std::uint32_t step = cfg.nodelay < 2 ? rto : s.rx_rto;
          rto += step / 2;
        }
        rto = std::min(rto, kRtoMax);
        resendts = cur + rto;
        lost = true;
        counter = &counters.retransmits;
      } else if (g->fastack >= resent && g->xmit <= kFastResendLimit) {
        send = true;
        ++xmit;
        fastack = 0;
        resendts = cur + rto;
        change = true;
        counter = &counters.fast_retransmits;
      }
      if (!send) continue;
      if (!emit(s, w, kCmdPush, g->frg, cur, g->sn, g->data.data(), g->len)) return false;
      if (counter != nullptr) ++*counter;
      g->xmit = xmit;
      g->rto = rto;
      g->resendts = resendts;
      g->fastack = fastack;
      g->ts = cur;
      if (g->xmit >= cfg.dead_link) {
        close_datagram(s, w);
        ++counters.dead_links;
        close(s, DisconnectReason::timeout);
        return true;
      }
    }
    close_datagram(s, w);

    if (change) {
      const std::uint32_t inflight = s.snd_nxt - s.snd_una;
      s.ssthresh = std::max(inflight / 2, kThreshMin);
      s.cwnd = s.ssthresh + resent;
      s.incr = s.cwnd * mss;
    }
    if (lost) {
      s.ssthresh = std::max(cwnd / 2, kThreshMin);
      s.cwnd = 1;
      s.incr = mss;
    }
    if (s.cwnd < 1) {
      s.cwnd = 1;
      s.incr = mss;
    }
    return true;
  }

  std::size_t flush(std::uint64_t now_us, std::span<KcpDatagram> out) {
    now_ms = std::max(now_ms, now_us / 1000);
    wheel.advance(now_ms, [this](base::TimerNode& node) {
      auto& s = *static_cast<Session*>(node.owner);
      if (!s.live) return;
      // Whatever is in flight or being probed: a peer that shut its window and went away
      // would otherwise be probed forever.
      if (s.last_recv_ms + cfg.idle_timeout_ms <= now_ms) {
        ++counters.idle_timeouts;
        close(s, DisconnectReason::timeout);
        return;
      }
      if (s.rate_wait && s.rate_ready_ms <= now_ms) {
        s.rate_wait = false;
        release(s, true);
        if (end_if_broken(s)) return;
      }
      mark_dirty(s);
    });
    Writer w{out};
    while (dirty_head != nullptr) {
      Session& s = *dirty_head;
      if (s.live) {
        w.open = nullptr;
        if (!flush_session(s, w)) {
          // Batch full: the datagram in progress is complete as far as it goes.
          close_datagram(s, w);
          return w.n;
        }
      }
      dirty_head = s.dirty_next;
      if (dirty_head == nullptr) dirty_tail = nullptr;
      s.dirty = false;
      if (s.live) {
        schedule(s);
      } else {
        free_slots.push_back(s.slot);
      }
    }
    return w.n;
  }

  SendResult send(PeerHandle h, std::span<const std::byte> bytes) {
    Session* s = get(h);
    if (s == nullptr) return SendResult::not_connected;
    std::size_t len = bytes.size();
    if (cfg.max_queued_bytes != 0 && s->queued_bytes + len > cfg.max_queued_bytes)
      return SendResult::queue_full;
    const std::byte* p = bytes.data();
    if (cfg.stream && s->snd_queue.tail != nullptr && s->snd_queue.tail->len < mss) {
      Seg* t = s->snd_queue.tail;
      const std::size_t take = std::min<std::size_t>(len, mss - t->len);
      std::memcpy(t->data.data() + t->len, p, take);
      t->len += static_cast<std::uint32_t>(take);
      s->queued_bytes += take;
      p += take;
      len -= take;
      if (len == 0) {
        ++counters.messages_out;
        mark_dirty(*s);
        return SendResult::ok;
      }
    }
    const std::size_t count = len <= mss ? 1 : (len + mss - 1) / mss;
    if (!cfg.stream && (count >= cfg.rcv_wnd || count > kMaxFragments))
      return SendResult::too_large;
    if (s->snd_queue.n + count > cfg.max_queued_segments) return SendResult::queue_full;
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t n = std::min<std::size_t>(len, mss);
      Seg* g = pool.take();
      g->len = static_cast<std::uint32_t>(n);
      if (n != 0) std::memcpy(g->data.data(), p, n);
      g->frg = cfg.stream ? 0 : static_cast<std::uint8_t>(count - i - 1);
      s->snd_queue.push_back(g);
      s->queued_bytes += n;
      p += n;
      len -= n;
    }
    ++counters.messages_out;
    mark_dirty(*s);
    return SendResult::ok;
  }
};

KcpCore::KcpCore(const KcpConfig& config) : impl_(std::make_unique<Impl>(config)) {}
KcpCore::~KcpCore() = default;

void KcpCore::on_datagram(std::uint64_t now_us, const Endpoint& from,
                          std::span<const std::byte> bytes) {
  impl_->on_datagram(now_us, from, bytes);
}

PeerHandle KcpCore::connect(std::uint64_t now_us, const Endpoint& to, std::uint32_t conv) {
  Impl& m = *impl_;
  m.now_ms = std::max(m.now_ms, now_us / 1000);
  if (m.table.find(Impl::key_of(to, conv)) != nullptr) return {};
  // The application asks for this session again: it is no longer refused.
  if (const std::uint32_t* at = m.refused_index.find(Impl::key_of(to, conv)); at != nullptr)
    m.forget_refused(*at);
  Session* s = m.open(m.now_ms, to, conv);
  return s != nullptr ? Impl::handle(*s) : PeerHandle{};
}

SendResult KcpCore::send(PeerHandle session, std::span<const std::byte> bytes) {
  return impl_->send(session, bytes);
}

void KcpCore::disconnect(PeerHandle session) {
  Session* s = impl_->get(session);
  if (s == nullptr) return;
  impl_->remember_refused(*s);
  impl_->close(*s, DisconnectReason::none);
}

void KcpCore::hold(PeerHandle session, bool held) {
  Impl& m = *impl_;
  Session* s = m.get(session);
  if (s == nullptr || s->held == held) return;
  s->held = held;
  if (held) {
    ++m.counters.holds;
    return;
  }
  m.release(*s, true);
  m.end_if_broken(*s);
}

bool KcpCore::held(PeerHandle session) const {
  const Session* s = impl_->get(session);
  return s != nullptr && s->held;
}

std::size_t KcpCore::flush(std::uint64_t now_us, std::span<KcpDatagram> out) {
  return impl_->flush(now_us, out);
}

bool KcpCore::poll_event(Event& out) { return impl_->events.pop(out); }

std::uint64_t KcpCore::next_deadline_us() const {
  if (impl_->dirty_head != nullptr) return impl_->now_ms * 1000;
  const std::uint64_t t = impl_->wheel.next_expiry();
  return t == base::TimerWheel::kNever ? UINT64_MAX : t * 1000;
}

bool KcpCore::session_stats(PeerHandle session, KcpSessionStats& out) const {
  const Session* s = impl_->get(session);
  if (s == nullptr) return false;
  out.conv = s->conv;
  out.srtt_ms = static_cast<std::uint32_t>(s->rx_srtt);
  out.rto_ms = s->rx_rto;
  out.cwnd = s->cwnd;
  out.remote_wnd = s->rmt_wnd;
  out.in_flight = s->snd_buf.n;
  out.queued = s->snd_queue.n;
  out.queued_bytes = s->queued_bytes;
  out.fec_seen = s->fec_seen;
  out.held = s->held;
  out.recv_window = impl_->wnd_unused(*s);
  out.waiting = s->pending.n;
  return true;
}

std::optional<Endpoint> KcpCore::session_address(PeerHandle session) const {
  const Session* s = impl_->get(session);
  if (s == nullptr) return std::nullopt;
  return s->addr;
}

std::size_t KcpCore::session_count() const { return impl_->live_sessions; }
std::size_t KcpCore::segments_held() const { return impl_->pool.live(); }
const KcpCounters& KcpCore::counters() const { return impl_->counters; }
const KcpConfig& KcpCore::config() const { return impl_->cfg; }

}  // namespace tern::proto::kcp
