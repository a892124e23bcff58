// The C API (tern/tern.h) over tern::Host: opaque handles, error codes, and no exception
// ever crossing into the caller's C frames (an exception unwinding through C is undefined).
#include <tern/tern.h>
#include <tern/host.hpp>
#include "secure/secure.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iterator>
#include <new>
#include <string>
#include <string_view>
#include <type_traits>

struct tern_host {
  std::unique_ptr<tern::Host> host;
  // The last receive event's message, so tern_event.data stays valid until the next service
  // call without a copy (ENet hands out a packet to destroy instead; this has nothing to free).
  tern::Packet held;
  tern::Packet held_info;  // the last discovery answer's info, as `held`
  // Reserved at creation: a failure path that has to allocate would be the wrong place to
  // run out of memory.
  std::string last_error;
};

namespace {

static_assert(std::is_trivially_copyable_v<tern_event>);
static_assert(sizeof(tern::Endpoint::addr) == sizeof(tern_address::addr));

constexpr std::size_t kErrorReserve = 256;

// A C caller may store any int where tern.h names an enum, and in C++ a value outside the
// enumerators is no value of the enum at all: its bytes are read as the integer they are,
// and only then checked.
template <typename Enum>
std::underlying_type_t<Enum> c_enum_value(const Enum& e) {
  std::underlying_type_t<Enum> raw;
  std::memcpy(&raw, &e, sizeof raw);
  return raw;
}

void set_error(const tern_host* host, std::string_view why) {
  if (host == nullptr) return;
  auto& text = const_cast<tern_host*>(host)->last_error;
  // assign() into reserved capacity: no allocation for the messages this file writes.
  text.assign(why.substr(0, text.capacity() != 0 ? text.capacity() : why.size()));
}

void clear_error(const tern_host* host) {
  if (host != nullptr) const_cast<tern_host*>(host)->last_error.clear();
}

tern_peer to_c(tern::PeerHandle p) { return tern_peer{p.slot, p.generation}; }
tern::PeerHandle to_cpp(tern_peer p) { return tern::PeerHandle{p.slot, p.generation}; }

tern_address to_c(const tern::Endpoint& e) {
  tern_address a{};
  std::memcpy(a.addr, e.addr.data(), sizeof a.addr);
  a.port = e.port;
  return a;
}

tern::Endpoint to_cpp(const tern_address& a) { return tern::Endpoint::v6(a.addr, a.port); }

int to_c(tern::SendResult r) {
  switch (r) {
    case tern::SendResult::ok: return TERN_OK;
    case tern::SendResult::not_connected: return TERN_ERROR_NOT_CONNECTED;
    case tern::SendResult::bad_channel: return TERN_ERROR_BAD_CHANNEL;
    case tern::SendResult::too_large: return TERN_ERROR_TOO_LARGE;
    case tern::SendResult::queue_full: return TERN_ERROR_QUEUE_FULL;
    case tern::SendResult::not_reliable: return TERN_ERROR_INVALID_ARGUMENT;
    case tern::SendResult::block_busy: return TERN_ERROR_BLOCK_BUSY;
  }
  return TERN_ERROR;
}

uint32_t to_flags(tern::Delivery d) {
  switch (d) {
    case tern::Delivery::reliable: return TERN_SEND_RELIABLE;
    case tern::Delivery::unreliable: return 0;
    case tern::Delivery::unsequenced: return TERN_SEND_UNSEQUENCED;
    case tern::Delivery::reliable_unordered: return TERN_SEND_RELIABLE_UNORDERED;
    case tern::Delivery::reliable_sequenced: return TERN_SEND_RELIABLE_SEQUENCED;
  }
  return 0;
}

// Every scalar field tern_host_options mirrors, with its tern::HostOptions field: the defaults
// and the conversion walk this one list, so they cannot drift apart.
template <class C, class H, class Each>
void each_mirrored_field(C& c, H& h, Each&& each) {
  each(c.peer_limit, h.peer_limit);
  each(c.channel_limit, h.channel_limit);
  each(c.incoming_bandwidth, h.incoming_bandwidth);
  each(c.outgoing_bandwidth, h.outgoing_bandwidth);
  each(c.mtu, h.mtu);
  each(c.checksum, h.checksum);
  each(c.max_packet_size, h.max_packet_size);
  each(c.max_waiting_data, h.max_waiting_data);
  each(c.memory_cap, h.memory_cap);
  each(c.max_queued, h.max_queued);
  each(c.ping_interval_ms, h.ping_interval_ms);
  each(c.timeout_limit, h.timeout_limit);
  each(c.timeout_minimum_ms, h.timeout_minimum_ms);
  each(c.timeout_maximum_ms, h.timeout_maximum_ms);
  each(c.random_seed, h.random_seed);
  each(c.socket_receive_buffer, h.socket_receive_buffer);
  each(c.socket_send_buffer, h.socket_send_buffer);
  each(c.selective_acks, h.selective_acks);
  each(c.fast_retransmit, h.fast_retransmit);
  each(c.congestion_window, h.congestion_window);
  each(c.throttle_reliable_window, h.throttle_reliable_window);
  each(c.nodelay, h.nodelay);
  each(c.delivery_modes, h.delivery_modes);
  each(c.redundancy, h.redundancy);
  each(c.path_mtu, h.path_mtu);
  each(c.discovery, h.discovery);
  each(c.discovery_rate_per_address, h.discovery_rate_per_address);
  each(c.discovery_rate_per_prefix, h.discovery_rate_per_prefix);
  each(c.nodelay_resend, h.nodelay_resend);
  each(c.redundancy_max_k, h.redundancy_max_k);
  each(c.redundancy_budget_percent, h.redundancy_budget_percent);
  each(c.redundancy_high_loss_budget_percent, h.redundancy_high_loss_budget_percent);
  each(c.redundancy_ack_repeats, h.redundancy_ack_repeats);
  each(c.congestion_control, h.congestion_control);
  each(c.cc_express_bytes, h.cc_express_bytes);
  each(c.cc_max_window, h.cc_max_window);
  each(c.blocks, h.blocks);
  each(c.max_block_size, h.max_block_size);
  each(c.block_rate, h.block_rate);
  each(c.path_mtu_max, h.path_mtu_max);
  each(c.verify_before_peer, h.verify_before_peer);
  each(c.half_open_capacity, h.half_open_capacity);
  each(c.half_open_timeout_ms, h.half_open_timeout_ms);
  each(c.idle_ping_intervals, h.idle_ping_intervals);
}

// `to = from`, each side in its own type (C's int switches are bools in C++, and back).
constexpr auto kAssign = [](auto& to, const auto& from) {
  to = static_cast<std::remove_cvref_t<decltype(to)>>(from);
};

tern::HostOptions to_cpp(const tern_host_options& o) {
  tern::HostOptions h;
  each_mirrored_field(o, h, [](const auto& from, auto& to) { kAssign(to, from); });
  std::copy(std::begin(o.nodelay_channels), std::end(o.nodelay_channels),
            h.nodelay_channels.begin());
  const std::size_t rules = std::min<std::size_t>(o.channel_option_count, TERN_MAX_CHANNEL_RULES);
  for (std::size_t i = 0; i < rules; ++i) {
    const tern_channel_options& c = o.channel_options[i];
    tern::ChannelRule r;
    std::copy(std::begin(c.channels), std::end(c.channels), r.channels.begin());
    r.options.fast_retransmit = c.fast_retransmit != 0;
    r.options.nodelay = c.nodelay != 0;
    r.options.redundancy = c.redundancy != 0;
    r.options.congestion_control = c.congestion_control != 0;
    r.options.cc_express = c.cc_express != 0;
    r.options.congestion_window = c.congestion_window != 0;
    r.options.delivery_modes = c.delivery_modes != 0;
    r.options.priority = static_cast<tern::Priority>(c_enum_value(c.priority));  // rules_valid
    h.channel_options.push_back(r);
  }
  return h;
}

// What to_cpp takes on trust in the channel rules: false with the reason.
bool rules_valid(const tern_host_options& o, std::string& why) {
  if (o.channel_option_count > TERN_MAX_CHANNEL_RULES) {
    why = "channel_option_count: more than TERN_MAX_CHANNEL_RULES";
    return false;
  }
  for (std::size_t i = 0; i < o.channel_option_count; ++i) {
    const auto priority = c_enum_value(o.channel_options[i].priority);
    if (priority < TERN_PRIORITY_IMMEDIATE || priority > TERN_PRIORITY_LOW) {
      why = "channel_options[" + std::to_string(i) + "].priority: not a tern_priority";
      return false;
    }
  }
  return true;
}

// The secure-session fields of the options, which name files and an address: false with the
// reason (the file's own, naming file and line, for a key file).
bool secure_options(const tern_host_options& o, tern::HostOptions& h, std::string& why) {
  if (o.security < TERN_SECURITY_PLAIN || o.security > TERN_SECURITY_REQUIRED) {
    why = "security: not TERN_SECURITY_PLAIN, _OPTIONAL or _REQUIRED";
    return false;
  }
  h.security = static_cast<tern::Security>(o.security);
  h.secure_aes = o.secure_aes != 0;
  for (const char* file : {o.token_key_file, o.token_key_file_old}) {
    if (file == nullptr) continue;
    if (o.token_key_file == nullptr) {
      why = "token_key_file_old: needs token_key_file (the current key)";
      return false;
    }
    tern::TokenKey k;
    if (!tern::load_token_key(file, k, why)) return false;
    h.token_keys.push_back(k);
  }
  if (h.security != tern::Security::plain && h.token_keys.empty()) {
    why = "security: a policy other than plain needs token_key_file";
    return false;
  }
  if (o.secure_address != nullptr) {
    const auto e = tern::Endpoint::parse(o.secure_address);
    if (!e || e->is_unspecified() || e->port == 0) {
      why =
          std::string("secure_address: not a specific address:port: \"") + o.secure_address + "\"";
      return false;
    }
    h.secure_addresses.push_back(*e);
  }
  return true;
}

void write_text(char* out, std::size_t size, std::string_view why) {
  if (out == nullptr || size == 0) return;
  const std::size_t n = std::min(size - 1, why.size());
  std::memcpy(out, why.data(), n);
  out[n] = '\0';
}

// Fills `event` from a tern::Event and keeps its message alive in the host.
void to_c(tern_host& h, tern::Event& ev, tern_event& out) {
  out = tern_event{};
  out.type = static_cast<tern_event_type>(ev.type);
  out.peer = to_c(ev.peer);
  out.address = to_c(ev.address);
  out.channel = ev.channel;
  out.reason = static_cast<tern_disconnect_reason>(ev.reason);
  out.user_data = ev.data;
  if (ev.type == tern::EventType::receive) {
    out.flags = to_flags(ev.delivery);
    h.held = ev.take_payload();
    const auto bytes = h.held.bytes();
    out.data = reinterpret_cast<const uint8_t*>(bytes.data());
    out.length = bytes.size();
  }
}

// A send at `priority`, or at the channel's default level (tern_channel_options) when null.
int send_at(tern_host* host, tern_peer peer, uint8_t channel, const void* data, size_t length,
            uint32_t flags, const tern_priority* priority) {
  if (host == nullptr) return TERN_ERROR_INVALID_ARGUMENT;
  constexpr uint32_t known = TERN_SEND_RELIABLE | TERN_SEND_UNSEQUENCED |
                             TERN_SEND_UNRELIABLE_FRAGMENT | TERN_SEND_RELIABLE_UNORDERED |
                             TERN_SEND_RELIABLE_SEQUENCED;
  constexpr uint32_t modes = (TERN_SEND_RELIABLE_UNORDERED | TERN_SEND_RELIABLE_SEQUENCED) &
                             ~static_cast<uint32_t>(TERN_SEND_RELIABLE);
  if ((flags & ~known) != 0 ||
      (flags & (TERN_SEND_RELIABLE | TERN_SEND_UNSEQUENCED)) ==
          (TERN_SEND_RELIABLE | TERN_SEND_UNSEQUENCED) ||
      ((flags & modes) != 0 && (flags & TERN_SEND_RELIABLE) == 0) || (flags & modes) == modes ||
      (data == nullptr && length != 0)) {
    set_error(host,
              "send: unknown flags, RELIABLE with UNSEQUENCED, a delivery mode without "
              "RELIABLE or both modes, or no data");
    return TERN_ERROR_INVALID_ARGUMENT;
  }
  const auto has = [&](uint32_t f) { return (flags & f) == f; };
  const tern::Delivery delivery =
      has(TERN_SEND_RELIABLE_UNORDERED)   ? tern::Delivery::reliable_unordered
      : has(TERN_SEND_RELIABLE_SEQUENCED) ? tern::Delivery::reliable_sequenced
      : has(TERN_SEND_RELIABLE)           ? tern::Delivery::reliable
      : has(TERN_SEND_UNSEQUENCED)        ? tern::Delivery::unsequenced
                                          : tern::Delivery::unreliable;
  try {
    const std::span<const std::byte> bytes(static_cast<const std::byte*>(data), length);
    const int r =
        to_c(priority == nullptr
                 ? host->host->send(to_cpp(peer), channel, delivery, bytes)
                 : host->host->send(to_cpp(peer), channel, delivery, tern::Packet::copy_of(bytes),
                                    static_cast<tern::Priority>(*priority)));
    if (r != TERN_OK) set_error(host, "send: refused (see the result)");
    return r;
  } catch (const std::bad_alloc&) {
    set_error(host, "send: out of memory");
    return TERN_ERROR_NO_MEMORY;
  } catch (...) {
    set_error(host, "send: failed");
    return TERN_ERROR;
  }
}

// A connect's result for C: the peer, or an invalid one with the reason in the host's error.
template <typename Connect>
tern_peer connect_with(tern_host* host, Connect&& connect) {
  try {
    const tern::PeerHandle p = connect();
    if (!p.valid()) {
      set_error(host, "connect: the peer limit is reached");
    } else {
      clear_error(host);
    }
    return to_c(p);
  } catch (const std::bad_alloc&) {
    set_error(host, "connect: out of memory");
  } catch (...) {
    set_error(host, "connect: failed");
  }
  return to_c(tern::PeerHandle{});
}

}  // namespace

static_assert(static_cast<int>(tern::EventType::receive) == TERN_EVENT_RECEIVE);
static_assert(static_cast<int>(tern::EventType::disconnect) == TERN_EVENT_DISCONNECT);
static_assert(static_cast<int>(tern::EventType::receipt) == TERN_EVENT_RECEIPT);
static_assert(static_cast<int>(tern::EventType::block_refused) == TERN_EVENT_BLOCK_REFUSED);
static_assert(static_cast<int>(tern::DisconnectReason::evicted) == TERN_REASON_EVICTED);
static_assert(static_cast<int>(tern::DisconnectReason::protocol_error) ==
              TERN_REASON_PROTOCOL_ERROR);
static_assert(static_cast<int>(tern::PeerState::zombie) == TERN_PEER_ZOMBIE);
static_assert(static_cast<int>(tern::Priority::immediate) == TERN_PRIORITY_IMMEDIATE);
static_assert(static_cast<int>(tern::Priority::low) == TERN_PRIORITY_LOW);

extern "C" {

const char* tern_version(void) { return TERN_LIBRARY_VERSION; }

tern_host_options tern_host_options_default(void) {
  const tern::HostOptions h;
  tern_host_options o{};
  each_mirrored_field(o, h, kAssign);
  std::copy(h.nodelay_channels.begin(), h.nodelay_channels.end(), std::begin(o.nodelay_channels));
  for (tern_channel_options& c : o.channel_options) c = tern_channel_options_default();
  o.channel_option_count = 0;

  o.security = TERN_SECURITY_PLAIN;
  o.secure_aes = h.secure_aes;
  return o;
}

tern_channel_options tern_channel_options_default(void) {
  const tern::ChannelOptions d;
  tern_channel_options c{};
  c.fast_retransmit = d.fast_retransmit;
  c.nodelay = d.nodelay;
  c.redundancy = d.redundancy;
  c.congestion_control = d.congestion_control;
  c.cc_express = d.cc_express;
  c.congestion_window = d.congestion_window;
  c.delivery_modes = d.delivery_modes;
  c.priority = static_cast<tern_priority>(d.priority);
  return c;
}

tern_host* tern_host_create(const tern_host_options* options, const char* bind, char* error,
                            size_t error_size) {
  write_text(error, error_size, "");
  if (bind == nullptr) {
    write_text(error, error_size, "no bind address");
    return nullptr;
  }
  try {
    const auto endpoint = tern::Endpoint::parse(bind);
    if (!endpoint) {
      write_text(error, error_size, std::string("not an address: \"") + bind + "\"");
      return nullptr;
    }
    const tern_host_options& o = options != nullptr ? *options : tern_host_options_default();
    std::string why;
    if (!rules_valid(o, why)) {
      write_text(error, error_size, why);
      return nullptr;
    }
    tern::HostOptions cpp = to_cpp(o);
    if (!secure_options(o, cpp, why)) {
      write_text(error, error_size, why);
      return nullptr;
    }
    auto host = tern::Host::listen(cpp, *endpoint, why);
    if (host == nullptr) {
      write_text(error, error_size, why);
      return nullptr;
    }
    auto* h = new tern_host{std::move(host), {}, {}, {}};
    h->last_error.reserve(kErrorReserve);
    return h;
  } catch (const std::bad_alloc&) {
    write_text(error, error_size, "out of memory");
  } catch (const std::exception& e) {
    write_text(error, error_size, e.what());
  } catch (...) {
    write_text(error, error_size, "unknown error");
  }
  return nullptr;
}

void tern_host_destroy(tern_host* host) {
  // ~Host frees memory and closes a socket: nothing in it throws.
  delete host;
}

const char* tern_host_last_error(const tern_host* host) {
  return host != nullptr ? host->last_error.c_str() : "no host";
}

tern_peer tern_host_connect(tern_host* host, const tern_address* address, size_t channel_count,
                            uint32_t user_data) {
  const tern_peer invalid = to_c(tern::PeerHandle{});
  if (host == nullptr) return invalid;
  if (address == nullptr || channel_count == 0 || channel_count > 255) {
    set_error(host, "connect: no address, or a channel count outside 1..255");
    return invalid;
  }
  return connect_with(
      host, [&] { return host->host->connect(to_cpp(*address), channel_count, user_data); });
}

int tern_host_service(tern_host* host, tern_event* event, uint32_t timeout_ms) {
  if (host == nullptr || event == nullptr) return TERN_ERROR_INVALID_ARGUMENT;
  host->held.reset();
  *event = tern_event{};
  try {
    tern::Event ev;
    if (!host->host->service(ev, std::chrono::milliseconds(timeout_ms))) return 0;
    to_c(*host, ev, *event);
    return 1;
  } catch (const std::bad_alloc&) {
    set_error(host, "service: out of memory");
    return TERN_ERROR_NO_MEMORY;
  } catch (...) {
    set_error(host, "service: failed");
    return TERN_ERROR;
  }
}

int tern_host_check_events(tern_host* host, tern_event* event) {
  if (host == nullptr || event == nullptr) return TERN_ERROR_INVALID_ARGUMENT;
  host->held.reset();
  *event = tern_event{};
  try {
    tern::Event ev;
    if (!host->host->check_events(ev)) return 0;
    to_c(*host, ev, *event);
    return 1;
  } catch (...) {
    set_error(host, "check_events: failed");
    return TERN_ERROR;
  }
}

void tern_host_flush(tern_host* host) {
  if (host == nullptr) return;
  try {
    host->host->flush();
  } catch (...) {
    set_error(host, "flush: failed");
  }
}

int tern_peer_send(tern_host* host, tern_peer peer, uint8_t channel, const void* data,
                   size_t length, uint32_t flags) {
  return send_at(host, peer, channel, data, length, flags, nullptr);
}

int tern_peer_send_priority(tern_host* host, tern_peer peer, uint8_t channel, const void* data,
                            size_t length, uint32_t flags, tern_priority priority) {
  if (host == nullptr) return TERN_ERROR_INVALID_ARGUMENT;
  const auto raw = c_enum_value(priority);
  if (raw < TERN_PRIORITY_IMMEDIATE || raw > TERN_PRIORITY_LOW) {
    set_error(host, "send: unknown priority");
    return TERN_ERROR_INVALID_ARGUMENT;
  }
  const auto checked = static_cast<tern_priority>(raw);
  return send_at(host, peer, channel, data, length, flags, &checked);
}

int tern_peer_send_with_receipt(tern_host* host, tern_peer peer, uint8_t channel, const void* data,
                                size_t length, uint32_t receipt) {
  if (host == nullptr || (data == nullptr && length != 0)) return TERN_ERROR_INVALID_ARGUMENT;
  try {
    const int r =
        to_c(host->host->send_with_receipt(to_cpp(peer), channel, tern::Delivery::reliable,
                                           tern::Packet::copy_of(std::span<const std::byte>(
                                               static_cast<const std::byte*>(data), length)),
                                           receipt));
    if (r != TERN_OK) set_error(host, "send_with_receipt: refused (see the result)");
    return r;
  } catch (const std::bad_alloc&) {
    set_error(host, "send_with_receipt: out of memory");
    return TERN_ERROR_NO_MEMORY;
  } catch (...) {
    set_error(host, "send_with_receipt: failed");
    return TERN_ERROR;
  }
}

int tern_peer_send_block(tern_host* host, tern_peer peer, uint8_t channel, const void* data,
                         size_t length) {
  if (host == nullptr || (data == nullptr && length != 0)) return TERN_ERROR_INVALID_ARGUMENT;
  try {
    const int r = to_c(host->host->send_block(to_cpp(peer), channel,
                                              tern::Packet::copy_of(std::span<const std::byte>(
                                                  static_cast<const std::byte*>(data), length))));
    if (r != TERN_OK) set_error(host, "send_block: refused (see the result)");
    return r;
  } catch (const std::bad_alloc&) {
    set_error(host, "send_block: out of memory");
    return TERN_ERROR_NO_MEMORY;
  } catch (...) {
    set_error(host, "send_block: failed");
    return TERN_ERROR;
  }
}

int tern_peer_block_in_flight(tern_host* host, tern_peer peer, uint8_t channel) {
  if (host == nullptr) return 0;
  return host->host->block_in_flight(to_cpp(peer), channel) ? 1 : 0;
}

void tern_peer_disconnect(tern_host* host, tern_peer peer, uint32_t user_data) {
  if (host == nullptr) return;
  try {
    host->host->disconnect(to_cpp(peer), user_data);
  } catch (...) {
    set_error(host, "disconnect: failed");
  }
}

void tern_peer_disconnect_now(tern_host* host, tern_peer peer, uint32_t user_data) {
  if (host == nullptr) return;
  try {
    host->host->disconnect_now(to_cpp(peer), user_data);
  } catch (...) {
    set_error(host, "disconnect_now: failed");
  }
}

void tern_peer_disconnect_later(tern_host* host, tern_peer peer, uint32_t user_data) {
  if (host == nullptr) return;
  try {
    host->host->disconnect_later(to_cpp(peer), user_data);
  } catch (...) {
    set_error(host, "disconnect_later: failed");
  }
}

void tern_peer_reset(tern_host* host, tern_peer peer) {
  if (host == nullptr) return;
  try {
    host->host->reset(to_cpp(peer));
  } catch (...) {
    set_error(host, "reset: failed");
  }
}

int tern_token_key_load(const char* path, tern_token_key* key, char* error, size_t error_size) {
  write_text(error, error_size, "");
  if (path == nullptr || key == nullptr) {
    write_text(error, error_size, "no path or no key");
    return TERN_ERROR_INVALID_ARGUMENT;
  }
  try {
    tern::TokenKey k;
    std::string why;
    if (!tern::load_token_key(path, k, why)) {
      write_text(error, error_size, why);
      return TERN_ERROR;
    }
    key->id = k.id;
    std::memcpy(key->key, k.key.data(), sizeof key->key);
    return TERN_OK;
  } catch (...) {
    write_text(error, error_size, "out of memory");
  }
  return TERN_ERROR;
}

int tern_token_key_generate(uint32_t id, tern_token_key* key) {
  if (key == nullptr) return TERN_ERROR_INVALID_ARGUMENT;
  if (!tern::proto::sec::available()) return TERN_ERROR;
  const tern::TokenKey k = tern::generate_token_key(id);
  key->id = k.id;
  std::memcpy(key->key, k.key.data(), sizeof key->key);
  return TERN_OK;
}

int tern_token_mint(const tern_token_key* key, const tern_token_request* request,
                    tern_connect_token* token, char* error, size_t error_size) {
  write_text(error, error_size, "");
  if (key == nullptr || request == nullptr || token == nullptr ||
      (request->server_count != 0 && request->servers == nullptr) ||
      (request->user_data_length != 0 && request->user_data == nullptr)) {
    write_text(error, error_size, "a NULL key, request, token, servers or user data");
    return TERN_ERROR_INVALID_ARGUMENT;
  }
  try {
    tern::TokenKey k;
    k.id = key->id;
    std::memcpy(k.key.data(), key->key, sizeof key->key);
    tern::TokenRequest r;
    r.client_id = request->client_id;
    r.timeout_s = request->timeout_s != 0 ? request->timeout_s : 10;
    // Past the limit mint_token refuses with its own reason; no need to copy them all.
    const std::size_t servers = std::min<std::size_t>(request->server_count, 64);
    for (std::size_t i = 0; i < servers; ++i) r.servers.push_back(to_cpp(request->servers[i]));
    r.user_data.assign(static_cast<const char*>(request->user_data),
                       std::min<std::size_t>(request->user_data_length, 4096));
    r.now_s = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                             std::chrono::system_clock::now().time_since_epoch())
                                             .count());
    r.expire_s = r.now_s + (request->valid_s != 0 ? request->valid_s : 30);
    tern::ConnectToken t;
    std::string why;
    if (!tern::mint_token(k, r, t, why)) {
      write_text(error, error_size, why);
      return TERN_ERROR;
    }
    std::memcpy(token->sealed, t.sealed.data(), sizeof token->sealed);
    std::memcpy(token->client_to_server, t.client_to_server.data(), 32);
    std::memcpy(token->server_to_client, t.server_to_client.data(), 32);
    return TERN_OK;
  } catch (...) {
    write_text(error, error_size, "out of memory");
  }
  return TERN_ERROR;
}

int tern_connect_token_parse(const char* hex, tern_connect_token* token) {
  if (hex == nullptr || token == nullptr) return TERN_ERROR_INVALID_ARGUMENT;
  try {
    tern::ConnectToken t;
    std::string why;
    if (!tern::parse_connect_token(hex, t, why)) return TERN_ERROR_INVALID_ARGUMENT;
    std::memcpy(token->sealed, t.sealed.data(), sizeof token->sealed);
    std::memcpy(token->client_to_server, t.client_to_server.data(), 32);
    std::memcpy(token->server_to_client, t.server_to_client.data(), 32);
    return TERN_OK;
  } catch (...) {
  }
  return TERN_ERROR;
}

tern_peer tern_host_connect_secure(tern_host* host, const tern_address* address,
                                   size_t channel_count, uint32_t user_data,
                                   const tern_connect_token* token) {
  const tern_peer invalid = to_c(tern::PeerHandle{});
  if (host == nullptr) return invalid;
  if (address == nullptr || token == nullptr || channel_count == 0 || channel_count > 255) {
    set_error(host, "connect: no address or token, or a channel count outside 1..255");
    return invalid;
  }
  return connect_with(host, [&] {
    tern::ConnectToken t;
    t.sealed.assign(token->sealed, token->sealed + sizeof token->sealed);
    std::memcpy(t.client_to_server.data(), token->client_to_server, 32);
    std::memcpy(t.server_to_client.data(), token->server_to_client, 32);
    return host->host->connect_secure(to_cpp(*address), channel_count, user_data, t);
  });
}

int tern_peer_secure(const tern_host* host, tern_peer peer) {
  return host != nullptr && host->host->peer_secure(to_cpp(peer)) ? 1 : 0;
}

size_t tern_peer_token_user_data(const tern_host* host, tern_peer peer, const uint8_t** data) {
  if (data != nullptr) *data = nullptr;
  if (host == nullptr) return 0;
  const auto bytes = host->host->peer_user_data(to_cpp(peer));
  if (data != nullptr && !bytes.empty()) *data = bytes.data();
  return bytes.size();
}

int tern_peer_get_stats(const tern_host* host, tern_peer peer, tern_peer_stats* stats) {
  if (host == nullptr || stats == nullptr) return TERN_ERROR_INVALID_ARGUMENT;
  *stats = tern_peer_stats{};
  tern::PeerStats s;
  if (!host->host->peer_stats(to_cpp(peer), s)) return TERN_ERROR_NOT_CONNECTED;
  stats->rtt_ms = s.rtt_ms;
  stats->rtt_variance_ms = s.rtt_variance_ms;
  stats->lowest_rtt_ms = s.lowest_rtt_ms;
  stats->packet_loss = s.packet_loss;
  stats->packet_loss_variance = s.packet_loss_variance;
  stats->packet_throttle = s.packet_throttle;
  stats->packet_throttle_limit = s.packet_throttle_limit;
  stats->mtu = s.mtu;
  stats->window_size = s.window_size;
  stats->channel_count = s.channel_count;
  stats->datagrams_sent = s.datagrams_sent;
  stats->datagrams_received = s.datagrams_received;
  stats->bytes_sent = s.bytes_sent;
  stats->bytes_received = s.bytes_received;
  stats->reliable_retransmits = s.reliable_retransmits;
  stats->messages_sent = s.messages_sent;
  stats->messages_received = s.messages_received;
  stats->reliable_in_transit = s.reliable_in_transit;
  stats->queued_outgoing = s.queued_outgoing;
  stats->selective_acks = s.selective_acks;
  stats->nodelay = s.nodelay;
  stats->delivery_modes = s.delivery_modes;
  stats->redundancy = s.redundancy;
  stats->redundancy_k = s.redundancy_k;
  stats->congestion_control = s.congestion_control;
  stats->blocks = s.blocks;
  stats->path_mtu = s.path_mtu;
  stats->queued_bytes = s.queued_bytes;
  stats->ping_interval_ms = s.ping_interval_ms;
  stats->timeout_limit = s.timeout_limit;
  stats->timeout_minimum_ms = s.timeout_minimum_ms;
  stats->timeout_maximum_ms = s.timeout_maximum_ms;
  stats->throttle_interval_ms = s.throttle_interval_ms;
  stats->throttle_acceleration = s.throttle_acceleration;
  stats->throttle_deceleration = s.throttle_deceleration;
  return TERN_OK;
}

void tern_peer_timeout(tern_host* host, tern_peer peer, uint32_t limit, uint32_t minimum_ms,
                       uint32_t maximum_ms) {
  if (host == nullptr) return;
  try {
    host->host->set_peer_timeout(to_cpp(peer), limit, minimum_ms, maximum_ms);
  } catch (...) {
    set_error(host, "peer timeout: out of memory");
  }
}

void tern_peer_throttle_configure(tern_host* host, tern_peer peer, uint32_t interval_ms,
                                  uint32_t acceleration, uint32_t deceleration) {
  if (host == nullptr) return;
  try {
    host->host->set_peer_throttle(to_cpp(peer), interval_ms, acceleration, deceleration);
  } catch (...) {
    set_error(host, "throttle configure: out of memory");
  }
}

void tern_peer_ping_interval(tern_host* host, tern_peer peer, uint32_t interval_ms) {
  if (host == nullptr) return;
  try {
    host->host->set_peer_ping_interval(to_cpp(peer), interval_ms);
  } catch (...) {
    set_error(host, "ping interval: out of memory");
  }
}

int tern_host_set_discovery_info(tern_host* host, const void* info, size_t length) {
  if (host == nullptr || (info == nullptr && length != 0)) return TERN_ERROR_INVALID_ARGUMENT;
  try {
    host->host->set_discovery_info({static_cast<const std::byte*>(info), length});
    return TERN_OK;
  } catch (...) {
    set_error(host, "discovery info: out of memory");
    return TERN_ERROR_NO_MEMORY;
  }
}

uint32_t tern_host_discover(tern_host* host, const tern_address* address, size_t info_room) {
  if (host == nullptr || address == nullptr) return 0;
  try {
    const uint32_t nonce = host->host->discover(to_cpp(*address), info_room);
    if (nonce == 0) set_error(host, "discover: too many pings wait to be sent");
    return nonce;
  } catch (...) {
    set_error(host, "discover: out of memory");
    return 0;
  }
}

int tern_host_poll_discovery(tern_host* host, tern_discovery_answer* answer) {
  if (host == nullptr || answer == nullptr) return TERN_ERROR_INVALID_ARGUMENT;
  *answer = tern_discovery_answer{};
  tern::DiscoveryAnswer a;
  if (!host->host->poll_discovery(a)) return 0;
  answer->address = to_c(a.from);
  answer->rtt_us = a.rtt_us;
  answer->nonce = a.nonce;
  answer->truncated = a.truncated ? 1 : 0;
  host->held_info = std::move(a.info);
  answer->info = reinterpret_cast<const uint8_t*>(host->held_info.bytes().data());
  answer->info_length = host->held_info.size();
  return 1;
}

tern_peer_state tern_peer_get_state(const tern_host* host, tern_peer peer) {
  if (host == nullptr) return TERN_PEER_DISCONNECTED;
  return static_cast<tern_peer_state>(host->host->peer_state(to_cpp(peer)));
}

int tern_peer_get_address(const tern_host* host, tern_peer peer, tern_address* address) {
  if (host == nullptr || address == nullptr) return TERN_ERROR_INVALID_ARGUMENT;
  *address = tern_address{};
  if (host->host->peer_state(to_cpp(peer)) == tern::PeerState::disconnected) {
    return TERN_ERROR_NOT_CONNECTED;
  }
  *address = to_c(host->host->peer_address(to_cpp(peer)));
  return TERN_OK;
}

int tern_peer_valid(tern_peer peer) { return to_cpp(peer).valid() ? 1 : 0; }

int tern_peer_equal(tern_peer a, tern_peer b) { return to_cpp(a) == to_cpp(b) ? 1 : 0; }

void tern_host_get_stats(const tern_host* host, tern_host_stats* stats) {
  if (stats == nullptr) return;
  *stats = tern_host_stats{};
  if (host == nullptr) return;
  try {
    // HostStats lists the drops by reason in a vector: this is not a per-packet call.
    const tern::HostStats s = host->host->stats();
    stats->datagrams_in = s.datagrams_in;
    stats->bytes_in = s.bytes_in;
    stats->datagrams_out = s.datagrams_out;
    stats->bytes_out = s.bytes_out;
    stats->messages_in = s.messages_in;
    stats->messages_out = s.messages_out;
    stats->connects = s.connects;
    stats->disconnects = s.disconnects;
    stats->timeouts = s.timeouts;
    stats->retransmits = s.retransmits;
    stats->dropped = s.dropped;
    stats->peers = s.peers;
    stats->buffered_bytes = s.buffered_bytes;
    stats->fast_retransmits = s.fast_retransmits;
    stats->redundant_sent = s.redundant_sent;
    stats->discovery_pings_in = s.discovery_pings_in;
    stats->discovery_pongs_out = s.discovery_pongs_out;
    stats->discovery_refused = s.discovery_refused;
    stats->discovery_truncated = s.discovery_truncated;
    stats->discovery_pings_out = s.discovery_pings_out;
    stats->discovery_answers = s.discovery_answers;
    stats->nodelay_resends = s.nodelay_resends;
    stats->redundant_unreliable_sent = s.redundant_unreliable_sent;
    stats->paced_datagrams = s.paced_datagrams;
    stats->pacer_waits = s.pacer_waits;
    stats->cwnd_limited = s.cwnd_limited;
    stats->blocks_sent = s.blocks_sent;
    stats->blocks_received = s.blocks_received;
  } catch (...) {
    set_error(host, "stats: out of memory");
  }
}

size_t tern_host_peer_count(const tern_host* host) {
  return host != nullptr ? host->host->peer_count() : 0;
}

tern_address tern_host_local_address(const tern_host* host) {
  return host != nullptr ? to_c(host->host->local_endpoint()) : tern_address{};
}

int tern_address_parse(const char* text, tern_address* address) {
  if (text == nullptr || address == nullptr) return TERN_ERROR_INVALID_ARGUMENT;
  try {
    const auto e = tern::Endpoint::parse(text);
    if (!e) return TERN_ERROR_INVALID_ARGUMENT;
    *address = to_c(*e);
    return TERN_OK;
  } catch (...) {
    return TERN_ERROR;
  }
}

size_t tern_address_format(const tern_address* address, char* out, size_t size) {
  if (address == nullptr) {
    write_text(out, size, "");
    return 0;
  }
  try {
    const std::string text = to_cpp(*address).to_string();
    write_text(out, size, text);
    return text.size();
  } catch (...) {
    write_text(out, size, "");
    return 0;
  }
}

tern_address tern_address_ipv4(uint32_t host_order_addr, uint16_t port) {
  return to_c(tern::Endpoint::v4(host_order_addr, port));
}

}  // extern "C"
