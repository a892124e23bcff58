// The protocol core: which connection a datagram names: slots, peer IDs, address keys; peer
// allocation and reset. Part of host_core.cpp's translation unit (see README.md).
//
// The peer ID we hand out (and the remote side puts in every header it sends us) is the
// connection's slot, as in ENet, wherever the 12-bit field can hold it: a datagram then finds
// its connection by indexing, and the address it came from confirms it. Connections in
// slots from kMaxPeerId on (a shard with more than 4,095) get an ID that no other connection
// from their address uses, and a route key (address, ID) in by_address. Connections we
// accepted are also found by the client's own index, to recognise a retransmitted or
// restarted CONNECT: through the route key when the ID we gave mirrors that index, else an
// identity key (address, kIdentityKey | index), which no route key can equal. An accepted
// connection carries the peer ID its VERIFY_CONNECT promised before it had a slot (WIRE.md,
// "Handshake under attack"): usually its slot, else a route key too.
#include "core_impl.hpp"

namespace tern::proto {

// The slot of the connection a header's peer ID names for datagrams from `from`, or kNoSlot
// (its state is the caller's to check).
inline std::uint32_t HostCore::Impl::route_slot(const Endpoint& from, std::uint16_t id) const {
  if (id < slots.size()) {
    const Peer& q = slots[id];
    if (q.incoming_peer_id == id && q.state != PeerState::disconnected && q.address == from) {
      return id;
    }
  }
  const std::uint32_t* slot = by_address.find(base::PeerKey(from, id));
  return slot != nullptr ? *slot : kNoSlot;
}

inline Peer* HostCore::Impl::route(const Endpoint& from, std::uint16_t id) {
  const std::uint32_t slot = route_slot(from, id);
  return slot != kNoSlot ? &slots[slot] : nullptr;
}

// Whether datagrams from `address` naming `id` already go to some connection.
inline bool HostCore::Impl::peer_id_taken(const Endpoint& address, std::uint16_t id) const {
  return route_slot(address, id) != kNoSlot;
}

// A peer ID for a connection in a slot beyond the field's reach: `preferred` if no
// connection from that address uses it, else the next free one; kMaxPeerId when all 4,095
// are taken.
inline std::uint16_t HostCore::Impl::free_peer_id(const Endpoint& address,
                                                  std::uint16_t preferred) const {
  for (std::uint32_t i = 0; i < kMaxPeerId; ++i) {
    const auto id = static_cast<std::uint16_t>((preferred + i) % kMaxPeerId);
    if (!peer_id_taken(address, id)) return id;
  }
  return kMaxPeerId;
}

// A connection we accepted from `address`, found by the client's own index.
inline Peer* HostCore::Impl::find_accepted(const Endpoint& address, std::uint16_t client_index) {
  if (const std::uint32_t* slot =
          by_address.find(base::PeerKey(address, kIdentityKey | client_index))) {
    return &slots[*slot];
  }
  if (const std::uint32_t* slot = by_address.find(base::PeerKey(address, client_index))) {
    Peer& q = slots[*slot];
    if (q.accepted && q.outgoing_peer_id == client_index) return &q;
  }
  return nullptr;
}

// A new connection to or from `address`. Its peer ID is its slot where that can be used,
// else `preferred` or the next free ID (see routing above); null at the peer limit or when
// no ID is free.
inline Peer* HostCore::Impl::allocate_peer(const Endpoint& address, std::uint16_t preferred) {
  if (peer_count >= config.peer_limit) return nullptr;
  const std::uint16_t peer_id = predicted_peer_id(address, preferred);
  if (peer_id == kMaxPeerId) return nullptr;
  return take_slot(address, peer_id);
}

// The peer ID allocate_peer would give a connection from `address` now: the next free slot
// where the field can carry it, else `preferred` or the next free ID; kMaxPeerId when none.
inline std::uint16_t HostCore::Impl::predicted_peer_id(const Endpoint& address,
                                                       std::uint16_t preferred) const {
  const std::uint32_t next_slot = free_slots.empty() ? slots.size() : free_slots.back();
  return next_slot < kMaxPeerId && !peer_id_taken(address, static_cast<std::uint16_t>(next_slot))
             ? static_cast<std::uint16_t>(next_slot)
             : free_peer_id(address, preferred);
}

// A slot for a connection that will carry `peer_id` (free for `address`): a handshake's
// VERIFY_CONNECT promised it before the slot was taken, so it need not be the slot's own.
inline Peer* HostCore::Impl::take_slot(const Endpoint& address, std::uint16_t peer_id) {
  std::uint32_t slot;
  if (!free_slots.empty()) {
    slot = free_slots.back();
    free_slots.pop_back();
  } else {
    slot = slots.add();
  }
  Peer& p = slots[slot];
  // A free slot holds no side blocks (reset_peer released them).
  const std::uint32_t generation = p.generation;
  const std::uint8_t in_session = p.incoming_session;
  const std::uint8_t out_session = p.outgoing_session;
  p = Peer{};
  p.slot = slot;
  p.generation = generation;
  p.incoming_session = in_session;
  p.outgoing_session = out_session;
  p.address = address;
  p.incoming_peer_id = peer_id;
  p.mtu = static_cast<std::uint16_t>(config.mtu);
  if (peer_id != slot) by_address.insert(base::PeerKey(address, peer_id), slot);
  ++peer_count;
  return &p;
}

// Called once the client's index is known; see routing above.
inline void HostCore::Impl::key_accepted(Peer& p) {
  p.accepted = true;
  // Not needed only where the route key is (address, client index) itself.
  if (p.incoming_peer_id == p.slot || p.incoming_peer_id != p.outgoing_peer_id) {
    by_address.insert(base::PeerKey(p.address, kIdentityKey | p.outgoing_peer_id), p.slot);
  }
}

inline void HostCore::Impl::erase_key(const base::PeerKey& key, std::uint32_t slot) {
  if (const std::uint32_t* v = by_address.find(key); v != nullptr && *v == slot) {
    by_address.erase(key);
  }
}

inline void HostCore::Impl::set_state(Peer& p, PeerState s) {
  const bool was = p.connected_like();
  p.state = s;
  const bool is = p.connected_like();
  if (!was && is) {
    ++connected_peers;
    if (incoming_bandwidth(p) != 0) ++bandwidth_limited_peers;
  } else if (was && !is) {
    --connected_peers;
    if (incoming_bandwidth(p) != 0) --bandwidth_limited_peers;
  }
}

// enet_peer_reset: forget everything about the connection and free the slot.
inline void HostCore::Impl::reset_peer(Peer& p) {
  if (p.state == PeerState::disconnected) return;
  set_state(p, PeerState::connection_pending);  // leaves connected accounting
  release_blocks(p);
  if (p.incoming_peer_id != p.slot) erase_key(base::PeerKey(p.address, p.incoming_peer_id), p.slot);
  if (p.accepted) erase_key(base::PeerKey(p.address, kIdentityKey | p.outgoing_peer_id), p.slot);
  timers.cancel(p.timer);
  p.state = PeerState::disconnected;
  p.secure = false;  // its keys went with the extra block
  p.dirty = false;
  p.timer_due = false;
  ++p.generation;
  free_slots.push_back(p.slot);
  --peer_count;
}

}  // namespace tern::proto
