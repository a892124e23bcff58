// Receiver-side checks for tagged messages (payload.hpp), per (stream, channel, delivery):
//   reliable     exactly the next sequence number: no loss, no duplicate, no reordering;
//   unreliable   strictly increasing: never backwards, never twice;
//   unsequenced  never twice;
//   reliable_unordered  never twice (that none is lost shows in the count);
//   reliable_sequenced  strictly increasing: never backwards, never twice.
// Every message must also be intact and arrive on the channel and with the delivery it was
// sent with. Violations are collected (the first few verbatim) rather than thrown, so a
// scenario can stop early and report them together with its seed.
#pragma once

#include "payload.hpp"

#include <tern/types.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tern::simtest {

class DeliveryChecker {
 public:
  explicit DeliveryChecker(std::string who) : who_(std::move(who)) {}

  // Unsequenced messages above the fragment size travel as reliable fragments (as in ENet),
  // and the receiver cannot tell them from reliable ones. Callers that send such messages
  // accept the reliable label for them; the no-duplicate rule still applies.
  void accept_fragmented_unsequenced_as_reliable() { unsequenced_as_reliable_ = true; }

  void on_receive(const Event& ev) {
    const auto bytes = ev.packet.bytes();
    const auto tag = read_tag(bytes);
    if (!tag) {
      fail("untagged message of " + std::to_string(bytes.size()) + " bytes on channel " +
           std::to_string(ev.channel));
      return;
    }
    if (!check_payload(bytes, *tag)) {
      fail("corrupt message " + describe(*tag) + " (" + std::to_string(bytes.size()) + " bytes)");
      return;
    }
    if (ev.channel != tag->channel) {
      fail("message " + describe(*tag) + " arrived on channel " + std::to_string(ev.channel));
    }
    const bool relabelled = unsequenced_as_reliable_ && tag->delivery == Delivery::unsequenced &&
                            ev.delivery == Delivery::reliable;
    if (ev.delivery != tag->delivery && !relabelled) {
      fail("message " + describe(*tag) + " arrived as " + to_string(ev.delivery));
    }
    State& s = states_[key(*tag)];
    ++total_;
    switch (tag->delivery) {
      case Delivery::reliable:
        if (tag->seq != s.next) {
          fail("reliable " + describe(*tag) + " arrived when seq " + std::to_string(s.next) +
               " was expected");
          // Resynchronise so one fault is reported once, not for every later message.
          if (tag->seq >= s.next) s.next = tag->seq + 1;
        } else {
          ++s.next;
        }
        break;
      case Delivery::unreliable:
      case Delivery::reliable_sequenced:
        if (static_cast<std::int64_t>(tag->seq) <= s.last) {
          fail(describe(*tag) + " arrived after seq " + std::to_string(s.last));
        } else {
          s.last = tag->seq;
        }
        break;
      case Delivery::unsequenced:
      case Delivery::reliable_unordered:
        if (tag->seq >= s.seen.size()) s.seen.resize(tag->seq + 1024, false);
        if (s.seen[tag->seq]) fail(describe(*tag) + " delivered twice");
        s.seen[tag->seq] = true;
        break;
    }
    ++s.count;
  }

  // Messages accepted for one (stream, channel, delivery).
  std::uint64_t received(std::uint32_t stream, std::uint8_t channel, Delivery d) const {
    auto it = states_.find(key(Tag{stream, channel, d, 0, 0}));
    return it == states_.end() ? 0 : it->second.count;
  }
  // For reliable streams: the next sequence number expected.
  std::uint32_t next_reliable(std::uint32_t stream, std::uint8_t channel) const {
    auto it = states_.find(key(Tag{stream, channel, Delivery::reliable, 0, 0}));
    return it == states_.end() ? 0 : it->second.next;
  }
  std::uint64_t total() const { return total_; }
  bool ok() const { return failures_ == 0; }
  std::uint64_t failures() const { return failures_; }

  std::string report() const {
    std::string out = who_ + ": " + std::to_string(failures_) + " violation(s)";
    for (const auto& e : errors_) out += "\n  " + e;
    if (failures_ > errors_.size()) out += "\n  ...";
    return out;
  }

  void fail(const std::string& what) {
    ++failures_;
    if (errors_.size() < 20) errors_.push_back(what);
  }

 private:
  struct State {
    std::uint32_t next = 0;
    std::int64_t last = -1;
    std::vector<bool> seen;
    std::uint64_t count = 0;
  };

  static std::uint64_t key(const Tag& t) {
    return (std::uint64_t{t.stream} << 16) | (std::uint64_t{t.channel} << 8) |
           static_cast<std::uint64_t>(t.delivery);
  }
  static std::string describe(const Tag& t) {
    return std::string(to_string(t.delivery)) + " stream " + std::to_string(t.stream) + " ch " +
           std::to_string(t.channel) + " seq " + std::to_string(t.seq) + " (" +
           std::to_string(t.size) + " B)";
  }

  std::string who_;
  std::map<std::uint64_t, State> states_;
  std::vector<std::string> errors_;
  std::uint64_t failures_ = 0;
  std::uint64_t total_ = 0;
  bool unsequenced_as_reliable_ = false;
};

}  // namespace tern::simtest
