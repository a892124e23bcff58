// The protocol core: the command table. For each command number, the checks every command of
// that kind passes before its handler runs (the states it is taken in, a channel, a message
// size), whether its acknowledge flag is honoured, and the extension that owns it. on_datagram
// reads header -> route -> checksum, then each command goes through dispatch().
// Part of host_core.cpp's translation unit (see README.md).
#include "core_impl.hpp"

namespace tern::proto {

// Each entry's handler is the module function that owns the command; the lambdas only adapt
// its parameters. CONNECT has no handler here: it opens a connection, so on_datagram takes it
// before there is a peer to dispatch to.
constexpr HostCore::Impl::CommandRules HostCore::Impl::make_command_rules() {
  CommandRules t{};
  auto at = [&t](Cmd c) -> CommandRule& { return t[static_cast<std::size_t>(c)]; };
  at(Cmd::acknowledge) = {.handle = [](Impl& core, Peer& p, const Command& cmd, Arrival& a) {
    const Handled r = core.handle_acknowledge(p, cmd);
    if (r == Handled::stop) a.why = Drop::wrong_state;
    return r;
  }};
  at(Cmd::verify_connect) = {.handle = [](Impl& core, Peer& p, const Command& cmd, Arrival& a) {
    return core.handle_verify_connect(p, cmd, a.why);
  }};
  at(Cmd::disconnect) = {.handle = [](Impl& core, Peer& p, const Command& cmd, Arrival&) {
    return core.handle_disconnect(p, cmd);
  }};
  // A ping asks for nothing but its acknowledgement; the accepting side counts it as news
  // from the peer (timers.cpp, ping_after).
  at(Cmd::ping) = {.handle =
                       [](Impl& core, Peer& p, const Command&, Arrival&) {
                         core.heard_ping(p);
                         return Handled::ok;
                       },
                   .states = kConnectedLike};
  const CommandRule message{
      .states = kConnectedLike, .needs_channel = true, .carries_message = true};
  at(Cmd::send_reliable) = message;
  at(Cmd::send_reliable).handle = [](Impl& core, Peer& p, const Command& cmd, Arrival& a) {
    return core.handle_send_reliable(p, cmd, a.sent_time, a.why);
  };
  at(Cmd::send_unreliable) = message;
  at(Cmd::send_unreliable).handle = [](Impl& core, Peer& p, const Command& cmd, Arrival& a) {
    return core.handle_send_unreliable(p, cmd, a.why);
  };
  at(Cmd::send_unsequenced) = message;
  at(Cmd::send_unsequenced).handle = [](Impl& core, Peer& p, const Command& cmd, Arrival&) {
    return core.handle_send_unsequenced(p, cmd);
  };
  at(Cmd::send_fragment) = message;
  at(Cmd::send_fragment).handle = [](Impl& core, Peer& p, const Command& cmd, Arrival& a) {
    return core.handle_send_fragment(p, cmd, a.why);
  };
  at(Cmd::send_unreliable_fragment) = message;
  at(Cmd::send_unreliable_fragment).handle = [](Impl& core, Peer& p, const Command& cmd,
                                                Arrival& a) {
    return core.handle_send_unreliable_fragment(p, cmd, a.why);
  };
  at(Cmd::bandwidth_limit) = {
      .handle = [](Impl& core, Peer& p, const Command& cmd,
                   Arrival&) { return core.handle_bandwidth_limit(p, cmd); },
      .states = kConnectedLike};
  at(Cmd::throttle_configure) = {
      .handle = [](Impl& core, Peer& p, const Command& cmd,
                   Arrival&) { return core.handle_throttle_configure(p, cmd); },
      .states = kConnectedLike};
  // Extensions (WIRE.md): a host with none on reads their commands as a plain ENet host would
  // (an unknown command ends the datagram), and their acknowledge flag is never honoured. The
  // hello belongs to them all; each installs its own commands (extensions.cpp).
  at(Cmd::tern_hello) = {.handle = [](Impl& core, Peer& p, const Command& cmd,
                                      Arrival&) { return core.handle_hello(p, cmd); },
                         .acknowledged = false,
                         .feature = kAnyFeature};
  install_extension_commands(t);
  return t;
}

// A command's rule, checked, then its handler. The switch makes each command's rule a
// compile-time constant (kCommandRules is), so its checks fold away and its handler is called
// directly and inlined: through the table's pointer, the call and the spills around it cost
// about 45 instructions per datagram on each side of an unsequenced echo.
inline Handled HostCore::Impl::dispatch(Peer& p, const Command& cmd, Arrival& arrival) {
  switch (cmd.type()) {
    case Cmd::acknowledge: return dispatch_as<Cmd::acknowledge>(p, cmd, arrival);
    case Cmd::verify_connect: return dispatch_as<Cmd::verify_connect>(p, cmd, arrival);
    case Cmd::disconnect: return dispatch_as<Cmd::disconnect>(p, cmd, arrival);
    case Cmd::ping: return dispatch_as<Cmd::ping>(p, cmd, arrival);
    case Cmd::send_reliable: return dispatch_as<Cmd::send_reliable>(p, cmd, arrival);
    case Cmd::send_unreliable: return dispatch_as<Cmd::send_unreliable>(p, cmd, arrival);
    case Cmd::send_fragment: return dispatch_as<Cmd::send_fragment>(p, cmd, arrival);
    case Cmd::send_unsequenced: return dispatch_as<Cmd::send_unsequenced>(p, cmd, arrival);
    case Cmd::bandwidth_limit: return dispatch_as<Cmd::bandwidth_limit>(p, cmd, arrival);
    case Cmd::throttle_configure: return dispatch_as<Cmd::throttle_configure>(p, cmd, arrival);
    case Cmd::send_unreliable_fragment:
      return dispatch_as<Cmd::send_unreliable_fragment>(p, cmd, arrival);
    case Cmd::tern_hello: return dispatch_as<Cmd::tern_hello>(p, cmd, arrival);
    case Cmd::ack_range: return dispatch_as<Cmd::ack_range>(p, cmd, arrival);
    case Cmd::tern_ext: return dispatch_as<Cmd::tern_ext>(p, cmd, arrival);
    default: arrival.why = Drop::unknown_command; return Handled::stop;
  }
}

template <Cmd C>
inline Handled HostCore::Impl::dispatch_as(Peer& p, const Command& cmd, Arrival& arrival) {
  static_assert(static_cast<std::size_t>(C) < kCommandNumbers);
  const CommandRule& rule = kCommandRules[static_cast<std::size_t>(C)];
  if (rule.handle == nullptr || (rule.feature != 0 && (local_features() & rule.feature) == 0)) {
    arrival.why = Drop::unknown_command;
  } else if (rule.needs_channel && cmd.channel_id >= p.channel_count) {
    arrival.why = Drop::bad_channel;
  } else if ((rule.states & state_bit(p.state)) == 0) {
    arrival.why = Drop::wrong_state;
  } else if (rule.carries_message && cmd.payload.size() > config.max_packet_size) {
    arrival.why = Drop::message_too_large;
  } else {
    return rule.handle(*this, p, cmd, arrival);
  }
  return Handled::stop;
}

// ENet acknowledges a command that asks for it (a rule may say it never does) unless the
// handshake or a disconnect is under way; a peer acknowledging our disconnect gets only the
// DISCONNECT acknowledged.
inline void HostCore::Impl::acknowledge_if_asked(Peer& p, const Command& cmd,
                                                 std::uint16_t sent_time) {
  switch (p.state) {
    case PeerState::disconnecting:
    case PeerState::acknowledging_connect:
    case PeerState::disconnected:
    case PeerState::zombie: break;
    case PeerState::acknowledging_disconnect:
      if (cmd.type() == Cmd::disconnect) queue_ack(p, cmd, sent_time);
      break;
    default: queue_ack(p, cmd, sent_time); break;
  }
}

}  // namespace tern::proto
