// ARP for IPv4 over Ethernet: a small fixed-capacity cache and a sans-I/O resolver.
//
// Time is an argument (microseconds on any monotonic clock, like the protocol core); nothing
// here sends: the resolver says when a request or a reply is due and the caller builds it with
// build_arp_request / build_arp_reply (net.hpp). No packets are queued here: while a lookup is
// pending the caller holds or drops the datagram (and counts it).
//
//   auto r = resolver.lookup(next_hop_v4(link, dst_ip), now);
//   if (r.send_request) tx(build_arp_request(buf, link, ip));
//   if (r.status == ArpLookup::Status::resolved) tx(build_udp(buf, link, r.mac, ...));
//   else if (r.status == ArpLookup::Status::failed) counters.add(no_route);
//   ...
//   auto v = resolver.on_arp(parsed.arp, now);            // every ARP frame parse_frame returns
//   if (v.reply) tx(build_arp_reply(buf, link, parsed.arp));
//   n = resolver.poll(now, due_ips);                       // retries nobody looked up
#pragma once

#include "net.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>

namespace tern::net {

struct ArpConfig {
  std::uint64_t reachable_us = 60'000'000;   // an answer is trusted this long
  std::uint64_t refresh_us = 45'000'000;     // after this, lookups also ask for a fresh answer
  std::uint64_t retry_us = 1'000'000;        // between requests for a pending (or refreshing) IP
  std::uint32_t max_requests = 3;            // requests before a pending lookup fails
  std::uint64_t failed_hold_us = 5'000'000;  // a failed IP fails lookups this long, no requests
};

// IPv4 (host order) -> MAC, at most kCapacity entries, linear scan (a shard talks to a gateway
// and a few on-link hosts). Static entries never expire nor get evicted nor overwritten by ARP.
class ArpTable {
 public:
  static constexpr std::size_t kCapacity = 64;

  enum class State : std::uint8_t { empty, pending, resolved, failed };

  struct Entry {
    std::uint32_t ip = 0;
    MacAddress mac;
    State state = State::empty;
    bool is_static = false;
    std::uint8_t requests = 0;  // requests sent in the current pending round
    // pending: when the next request is due; resolved: expiry; failed: end of the hold.
    std::uint64_t deadline = 0;
    std::uint64_t refresh_at = 0;  // resolved: when the next refresh request is due
  };

  Entry* find(std::uint32_t ip);
  const Entry* find(std::uint32_t ip) const;
  // An entry for `ip` (existing, or a fresh empty one taking a free slot or evicting, in order,
  // a failed entry, the resolved entry expiring first, the pending entry due first). A fresh
  // entry is State::empty (invisible to find) until the caller sets its state. nullptr when
  // every slot is static.
  Entry* find_or_insert(std::uint32_t ip);
  bool set_static(std::uint32_t ip, MacAddress mac);  // false when the table is all static
  bool remove(std::uint32_t ip);
  std::size_t size() const;  // entries not empty
  std::span<Entry> entries() { return entries_; }
  std::span<const Entry> entries() const { return entries_; }

 private:
  std::array<Entry, kCapacity> entries_{};
};

struct ArpLookup {
  enum class Status : std::uint8_t {
    resolved,  // mac is valid: send now
    pending,   // no answer yet: hold or drop the datagram
    failed,    // no answer after max_requests (or the table is full of static entries): drop
  };
  Status status = Status::pending;
  MacAddress mac;
  bool send_request = false;  // send build_arp_request(ip) now
};

struct ArpVerdict {
  bool reply = false;     // a request for our IP: answer with build_arp_reply(packet)
  bool learned = false;   // the sender's mapping was stored or refreshed
  bool conflict = false;  // someone else claims our IP (the packet is otherwise ignored)
};

struct ArpCounters {
  std::uint64_t requests = 0;  // send_request verdicts (lookup and poll)
  std::uint64_t failures = 0;  // pending rounds that ran out of requests
  std::uint64_t learned = 0;
  std::uint64_t replies = 0;
  std::uint64_t conflicts = 0;
  std::uint64_t table_full = 0;  // lookups failed because every slot is static
};

class ArpResolver {
 public:
  explicit ArpResolver(const LinkConfig& local, ArpConfig config = {})
      : local_ip_(local.ipv4), config_(config) {}

  // A configured mapping (the gateway's MAC): always resolved, never asked for.
  bool set_static(std::uint32_t ip, MacAddress mac) { return table_.set_static(ip, mac); }

  // Where to send a datagram for `ip` (host order; normally next_hop_v4 of the destination).
  // 255.255.255.255 resolves to the broadcast MAC.
  ArpLookup lookup(std::uint32_t ip, std::uint64_t now_us);

  // Every ARP packet received (parse_frame's Kind::arp). Learns from replies and requests whose
  // sender is already in the table (RFC 826's merge) and from any packet targeting our IP.
  ArpVerdict on_arp(const ArpPacket& packet, std::uint64_t now_us);

  // Requests due for pending IPs that no lookup has asked about since (written to `due`, as many
  // as fit; the rest stay due) and the pending rounds that have run out fail. Returns the count.
  std::size_t poll(std::uint64_t now_us, std::span<std::uint32_t> due);
  // The earliest time poll() has work, or max() when nothing is pending.
  std::uint64_t next_deadline() const;

  const ArpTable& table() const { return table_; }
  const ArpCounters& counters() const { return counters_; }

 private:
  // Starts a pending round for `e`: one request now.
  ArpLookup start_round(ArpTable::Entry& e, std::uint64_t now_us);
  // A pending entry whose retry is due: another request, or failure.
  bool retry_or_fail(ArpTable::Entry& e, std::uint64_t now_us);

  std::uint32_t local_ip_;
  ArpConfig config_;
  ArpTable table_;
  ArpCounters counters_;
};

}  // namespace tern::net
