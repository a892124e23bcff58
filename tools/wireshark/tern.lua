-- Wireshark dissector for Tern: the ENet 1.3 wire format and Tern's extension commands
-- (engine/protocol/WIRE.md is the specification; this file only reads it).
--
-- Load it with `tshark -X lua_script:tools/wireshark/tern.lua` or install it into a Wireshark
-- plugin folder (tools/wireshark/README.md). Every field is filterable under `tern.*`.
--
-- Rules this file keeps:
--  * It never raises a Lua error on any input: a datagram that breaks the format gets expert
--    info (group "Malformed") at the place it breaks, and decoding stops there, as a receiver
--    stops reading at the first command it cannot use.
--  * Checksums are invisible on the wire (both hosts just agree on them), so the dissector
--    decides per conversation: by the "checksum" preference, or ("auto") by which layout parses
--    and, for handshake datagrams, by verifying the CRC.

local tern = Proto("tern", "Tern reliable UDP (ENet 1.3)")

---------------------------------------------------------------------------------------------
-- Integer helpers. Wireshark 4.0 ships Lua 5.2 (bit32); later releases ship Lua 5.4, which
-- has native operators and no bit32. Loading the operators through `load` keeps this file
-- parseable by 5.2.
local band, bor, bxor, rshift
if bit32 then
    band, bor, bxor, rshift = bit32.band, bit32.bor, bit32.bxor, bit32.rshift
else
    band = load("return function(a, b) return a & b end")()
    bor = load("return function(a, b) return a | b end")()
    bxor = load("return function(a, b) return (a ~ b) & 0xFFFFFFFF end")()
    rshift = load("return function(a, n) return (a & 0xFFFFFFFF) >> n end")()
end

---------------------------------------------------------------------------------------------
-- Wire constants (enet/protocol.h; WIRE.md).
local MAX_PEER_ID = 0x0FFF
local SYSTEM_CHANNEL = 0xFF
local FLAG_ACK = 0x80
local FLAG_UNSEQ = 0x40
local HDR_COMPRESSED = 0x4000
local HDR_SENT_TIME = 0x8000

local CMD = {
    ACKNOWLEDGE = 1, CONNECT = 2, VERIFY_CONNECT = 3, DISCONNECT = 4, PING = 5,
    SEND_RELIABLE = 6, SEND_UNRELIABLE = 7, SEND_FRAGMENT = 8, SEND_UNSEQUENCED = 9,
    BANDWIDTH_LIMIT = 10, THROTTLE_CONFIGURE = 11, SEND_UNRELIABLE_FRAGMENT = 12,
    TERN_HELLO = 13, ACK_RANGE = 14, TERN_EXT = 15,
}
local cmd_names = {}
for name, n in pairs(CMD) do cmd_names[n] = name end
-- Fixed size of each command, header included (payload excluded).
local cmd_size = { [1] = 8, [2] = 48, [3] = 44, [4] = 8, [5] = 4, [6] = 6, [7] = 8, [8] = 24,
                   [9] = 8, [10] = 12, [11] = 16, [12] = 24, [13] = 8, [14] = 10, [15] = 8 }
-- Commands ENet sends only on the system channel.
local system_only = { [2] = true, [3] = true, [4] = true, [5] = true, [10] = true, [11] = true,
                      [13] = true }
local MAX_FRAGMENT_COUNT = 1024 * 1024
local FEATURE_SELECTIVE_ACKS = 1
local FEATURE_NODELAY = 0x2
local FEATURE_DELIVERY_MODES = 0x8
local FLAG_TERN_UNORDERED = 0x20
local FLAG_TERN_SEQUENCED = 0x10

---------------------------------------------------------------------------------------------
-- Fields.
local f = {}
f.peer_word = ProtoField.uint16("tern.peer_word", "Peer word", base.HEX)
f.peer_id = ProtoField.uint16("tern.peer_id", "Peer ID", base.DEC, nil, 0x0FFF)
f.session = ProtoField.uint16("tern.session", "Session", base.DEC, nil, 0x3000)
f.compressed = ProtoField.bool("tern.compressed", "Compressed", 16, nil, HDR_COMPRESSED)
f.has_sent_time = ProtoField.bool("tern.has_sent_time", "Sent time present", 16, nil, HDR_SENT_TIME)
f.sent_time = ProtoField.uint16("tern.sent_time", "Sent time (ms, low 16 bits)", base.DEC)
f.checksum = ProtoField.uint32("tern.checksum", "Checksum (CRC-32)", base.HEX)
f.checksum_status = ProtoField.uint8("tern.checksum.status", "Checksum status", base.DEC,
    { [0] = "unverified", [1] = "good", [2] = "bad" })
f.command_count = ProtoField.uint8("tern.command_count", "Commands decoded", base.DEC)

f.command = ProtoField.bytes("tern.command", "Command")
f.cmd = ProtoField.uint8("tern.cmd", "Command number", base.DEC, cmd_names, 0x0F)
f.flag_ack = ProtoField.bool("tern.flags.acknowledge", "Acknowledge", 8, nil, FLAG_ACK)
f.flag_unseq = ProtoField.bool("tern.flags.unsequenced", "Unsequenced", 8, nil, FLAG_UNSEQ)
-- Tern's delivery modes, on reliable commands to a peer that agreed them (ENet leaves the bits 0).
f.flag_unordered = ProtoField.bool("tern.flags.unordered", "Tern: reliable unordered", 8, nil,
    FLAG_TERN_UNORDERED)
f.flag_sequenced = ProtoField.bool("tern.flags.sequenced", "Tern: reliable sequenced", 8, nil,
    FLAG_TERN_SEQUENCED)
f.channel = ProtoField.uint8("tern.channel", "Channel", base.DEC)
f.reliable_seq = ProtoField.uint16("tern.reliable_seq", "Reliable sequence number", base.DEC)

f.ack_seq = ProtoField.uint16("tern.ack.reliable_seq", "Received reliable sequence number", base.DEC)
f.ack_sent_time = ProtoField.uint16("tern.ack.sent_time", "Received sent time", base.DEC)

f.c_out_peer = ProtoField.uint16("tern.connect.outgoing_peer_id", "Outgoing peer ID", base.DEC)
f.c_in_session = ProtoField.uint8("tern.connect.incoming_session", "Incoming session", base.DEC)
f.c_out_session = ProtoField.uint8("tern.connect.outgoing_session", "Outgoing session", base.DEC)
f.c_mtu = ProtoField.uint32("tern.connect.mtu", "MTU", base.DEC)
f.c_window = ProtoField.uint32("tern.connect.window_size", "Window size", base.DEC)
f.c_channels = ProtoField.uint32("tern.connect.channel_count", "Channel count", base.DEC)
f.c_in_bw = ProtoField.uint32("tern.connect.incoming_bandwidth", "Incoming bandwidth (B/s)", base.DEC)
f.c_out_bw = ProtoField.uint32("tern.connect.outgoing_bandwidth", "Outgoing bandwidth (B/s)", base.DEC)
f.c_thr_int = ProtoField.uint32("tern.connect.throttle_interval", "Throttle interval (ms)", base.DEC)
f.c_thr_acc = ProtoField.uint32("tern.connect.throttle_acceleration", "Throttle acceleration", base.DEC)
f.c_thr_dec = ProtoField.uint32("tern.connect.throttle_deceleration", "Throttle deceleration", base.DEC)
f.c_connect_id = ProtoField.uint32("tern.connect.connect_id", "Connect ID", base.HEX)
f.c_data = ProtoField.uint32("tern.connect.data", "Data", base.HEX)

f.disc_data = ProtoField.uint32("tern.disconnect.data", "Data", base.HEX)

f.data_length = ProtoField.uint16("tern.data_length", "Data length", base.DEC)
f.unreliable_seq = ProtoField.uint16("tern.unreliable_seq", "Unreliable sequence number", base.DEC)
f.unseq_group = ProtoField.uint16("tern.unsequenced_group", "Unsequenced group", base.DEC)
f.payload = ProtoField.bytes("tern.payload", "Payload")

f.fr_start = ProtoField.uint16("tern.fragment.start_seq", "Start sequence number", base.DEC)
f.fr_count = ProtoField.uint32("tern.fragment.count", "Fragment count", base.DEC)
f.fr_number = ProtoField.uint32("tern.fragment.number", "Fragment number", base.DEC)
f.fr_total = ProtoField.uint32("tern.fragment.total_length", "Total length", base.DEC)
f.fr_offset = ProtoField.uint32("tern.fragment.offset", "Fragment offset", base.DEC)

f.bw_in = ProtoField.uint32("tern.bandwidth.incoming", "Incoming bandwidth (B/s)", base.DEC)
f.bw_out = ProtoField.uint32("tern.bandwidth.outgoing", "Outgoing bandwidth (B/s)", base.DEC)

f.thr_int = ProtoField.uint32("tern.throttle.interval", "Interval (ms)", base.DEC)
f.thr_acc = ProtoField.uint32("tern.throttle.acceleration", "Acceleration", base.DEC)
f.thr_dec = ProtoField.uint32("tern.throttle.deceleration", "Deceleration", base.DEC)

f.hello_features = ProtoField.uint32("tern.hello.features", "Features", base.HEX)
f.hello_sacks = ProtoField.bool("tern.hello.selective_acks", "Selective acks (ACK_RANGE)", 32, nil,
    FEATURE_SELECTIVE_ACKS)
f.hello_nodelay = ProtoField.bool("tern.hello.nodelay", "Nodelay (acknowledge at once)", 32, nil,
    FEATURE_NODELAY)
f.hello_modes = ProtoField.bool("tern.hello.delivery_modes", "Delivery modes (unordered, sequenced)",
    32, nil, FEATURE_DELIVERY_MODES)

f.ar_sent_time = ProtoField.uint16("tern.ack_range.sent_time", "Received sent time", base.DEC)
f.ar_bitfield = ProtoField.uint32("tern.ack_range.bitfield", "Bitfield (bit i: base + 1 + i)", base.HEX)
f.ar_acked = ProtoField.string("tern.ack_range.acked", "Acknowledged sequence numbers")
f.ext_kind = ProtoField.uint8("tern.ext.kind", "Extension kind", base.DEC, {
    [1] = "block slice", [2] = "block ack", [3] = "MTU probe", [4] = "MTU probe ack",
    [5] = "discovery ping", [6] = "discovery pong", [7] = "congestion feedback",
    [16] = "block refused" })
f.ext_flags = ProtoField.uint8("tern.ext.flags", "Extension flags", base.HEX)
f.ar_count = ProtoField.uint8("tern.ack_range.count", "Sequence numbers acknowledged", base.DEC)

f.undecoded = ProtoField.bytes("tern.undecoded", "Bytes not decoded")

local field_list = {}
for _, v in pairs(f) do field_list[#field_list + 1] = v end
tern.fields = field_list

-- Expert info: every way a datagram can break the format has its own name to filter on.
local ef = {
    truncated_header = ProtoExpert.new("tern.expert.truncated_header", "Datagram shorter than its header",
        expert.group.MALFORMED, expert.severity.ERROR),
    truncated_command = ProtoExpert.new("tern.expert.truncated_command", "Command runs past the datagram",
        expert.group.MALFORMED, expert.severity.ERROR),
    payload_past = ProtoExpert.new("tern.expert.payload_past_datagram",
        "Data length runs past the datagram", expert.group.MALFORMED, expert.severity.ERROR),
    unknown_command = ProtoExpert.new("tern.expert.unknown_command",
        "Unknown command number: a receiver stops reading here", expert.group.MALFORMED,
        expert.severity.ERROR),
    bad_fragment = ProtoExpert.new("tern.expert.bad_fragment",
        "Fragment fields a receiver refuses (count, number, offset or length)",
        expert.group.MALFORMED, expert.severity.WARN),
    compressed = ProtoExpert.new("tern.expert.compressed",
        "Compressed datagram: commands not decoded (no compressor is negotiated)",
        expert.group.UNDECODED, expert.severity.NOTE),
    bad_channel = ProtoExpert.new("tern.expert.bad_channel",
        "Channel at or past the count the handshake agreed: a receiver stops reading here",
        expert.group.MALFORMED, expert.severity.ERROR),
    checksum_bad = ProtoExpert.new("tern.expert.checksum_bad", "Checksum does not match",
        expert.group.CHECKSUM, expert.severity.ERROR),
    internal = ProtoExpert.new("tern.expert.internal", "Dissector error (please report)",
        expert.group.MALFORMED, expert.severity.ERROR),
}
tern.experts = { ef.truncated_header, ef.truncated_command, ef.payload_past, ef.unknown_command,
                 ef.bad_fragment, ef.bad_channel, ef.compressed, ef.checksum_bad, ef.internal }

---------------------------------------------------------------------------------------------
-- Preferences.
local CHECKSUM_AUTO, CHECKSUM_ON, CHECKSUM_OFF = 0, 1, 2
tern.prefs.udp_port = Pref.uint("UDP port", 0,
    "Decode this UDP port as Tern/ENet (0: none; the heuristic still finds ENet on any port)")
tern.prefs.heuristic = Pref.bool("Heuristic", true,
    "Recognise ENet datagrams on any UDP port by their header and commands")
tern.prefs.checksum = Pref.enum("Checksum", CHECKSUM_AUTO,
    "Whether datagrams carry ENet's CRC-32 field (the wire does not say)",
    { { 1, "auto", CHECKSUM_AUTO }, { 2, "present", CHECKSUM_ON }, { 3, "absent", CHECKSUM_OFF } },
    false)

local udp_port_table = DissectorTable.get("udp.port")
local registered_port = 0
function tern.prefs_changed()
    if registered_port ~= 0 then udp_port_table:remove(registered_port, tern) end
    registered_port = tern.prefs.udp_port
    if registered_port ~= 0 then udp_port_table:add(registered_port, tern) end
end

---------------------------------------------------------------------------------------------
-- CRC-32 (reflected, polynomial 0xEDB88320), as enet_crc32.
local crc_table = {}
for i = 0, 255 do
    local c = i
    for _ = 1, 8 do
        if band(c, 1) ~= 0 then c = bxor(0xEDB88320, rshift(c, 1)) else c = rshift(c, 1) end
    end
    crc_table[i] = c
end

-- CRC of the datagram with the 4 checksum bytes at `at` replaced by `fill` (a 32-bit value,
-- written big-endian as it travelled).
local function datagram_crc(tvb, at, fill)
    local bytes = tvb:bytes()
    local fill_bytes = { rshift(fill, 24) % 256, rshift(fill, 16) % 256, rshift(fill, 8) % 256,
                         fill % 256 }
    local crc = 0xFFFFFFFF
    for i = 0, bytes:len() - 1 do
        local b = bytes:get_index(i)
        if i >= at and i < at + 4 then b = fill_bytes[i - at + 1] end
        crc = bxor(rshift(crc, 8), crc_table[band(bxor(crc, b), 0xFF)])
    end
    return bxor(crc, 0xFFFFFFFF)
end

---------------------------------------------------------------------------------------------
-- Conversation memory, filled in capture order (first pass): whether the conversation uses
-- checksums and its connect ID (from CONNECT/VERIFY_CONNECT), keyed by both endpoints.
local conversations = {}
local function conversation_key(pinfo)
    local a = tostring(pinfo.src) .. ":" .. pinfo.src_port
    local b = tostring(pinfo.dst) .. ":" .. pinfo.dst_port
    if a < b then return a .. "|" .. b end
    return b .. "|" .. a
end
function tern.init()
    conversations = {}
end

---------------------------------------------------------------------------------------------
-- Structural walk without a tree: does the datagram parse as commands from `offset` exactly
-- to its end? Used by the heuristic and to tell whether a checksum field is present.
local function walk_ok(tvb, offset, peer_id)
    local len = tvb:len()
    local n = 0
    while offset < len do
        if len - offset < 4 then return false end
        local first = tvb(offset, 1):uint()
        local number = band(first, 0x0F)
        local size = cmd_size[number]
        if not size or len - offset < size then return false end
        local channel = tvb(offset + 1, 1):uint()
        if system_only[number] and channel ~= SYSTEM_CHANNEL then return false end
        if number == CMD.CONNECT and peer_id ~= MAX_PEER_ID then return false end
        if n == 0 and peer_id == MAX_PEER_ID and number ~= CMD.CONNECT and number ~= CMD.DISCONNECT then
            return false
        end
        local data_length = 0
        if number == CMD.SEND_RELIABLE then
            data_length = tvb(offset + 4, 2):uint()
        elseif number == CMD.SEND_UNRELIABLE or number == CMD.SEND_UNSEQUENCED
            or number == CMD.SEND_FRAGMENT or number == CMD.SEND_UNRELIABLE_FRAGMENT
            or number == CMD.TERN_EXT then
            data_length = tvb(offset + 6, 2):uint()
        end
        offset = offset + size + data_length
        if offset > len then return false end
        n = n + 1
    end
    return n > 0
end

-- Where the commands start, and whether a checksum field precedes them.
local function layout(tvb, pinfo, peer_word)
    local base_off = 2
    if band(peer_word, HDR_SENT_TIME) ~= 0 then base_off = 4 end
    local peer_id = band(peer_word, MAX_PEER_ID)
    local pref = tern.prefs.checksum
    if pref == CHECKSUM_ON then return base_off, true end
    if pref == CHECKSUM_OFF then return base_off, false end
    local conv = conversations[conversation_key(pinfo)]
    if conv and conv.checksum ~= nil then return base_off, conv.checksum end
    if band(peer_word, HDR_COMPRESSED) ~= 0 then return base_off, false end
    local plain = walk_ok(tvb, base_off, peer_id)
    local summed = tvb:len() >= base_off + 4 and walk_ok(tvb, base_off + 4, peer_id)
    if summed and peer_id == MAX_PEER_ID then
        -- Handshake datagrams checksum with a zero connect ID: a match settles it.
        if datagram_crc(tvb, base_off, 0) == tvb(base_off, 4):uint() then return base_off, true end
    end
    if summed and not plain then return base_off, true end
    return base_off, false
end

---------------------------------------------------------------------------------------------
-- Command bodies: the fields after the 4-byte header, in order, with their sizes.
local bodies = {
    [CMD.ACKNOWLEDGE] = { { f.ack_seq, 2 }, { f.ack_sent_time, 2 } },
    [CMD.CONNECT] = { { f.c_out_peer, 2 }, { f.c_in_session, 1 }, { f.c_out_session, 1 },
        { f.c_mtu, 4 }, { f.c_window, 4 }, { f.c_channels, 4 }, { f.c_in_bw, 4 }, { f.c_out_bw, 4 },
        { f.c_thr_int, 4 }, { f.c_thr_acc, 4 }, { f.c_thr_dec, 4 }, { f.c_connect_id, 4 },
        { f.c_data, 4 } },
    [CMD.VERIFY_CONNECT] = { { f.c_out_peer, 2 }, { f.c_in_session, 1 }, { f.c_out_session, 1 },
        { f.c_mtu, 4 }, { f.c_window, 4 }, { f.c_channels, 4 }, { f.c_in_bw, 4 }, { f.c_out_bw, 4 },
        { f.c_thr_int, 4 }, { f.c_thr_acc, 4 }, { f.c_thr_dec, 4 }, { f.c_connect_id, 4 } },
    [CMD.DISCONNECT] = { { f.disc_data, 4 } },
    [CMD.PING] = {},
    [CMD.SEND_RELIABLE] = { { f.data_length, 2 } },
    [CMD.SEND_UNRELIABLE] = { { f.unreliable_seq, 2 }, { f.data_length, 2 } },
    [CMD.SEND_FRAGMENT] = { { f.fr_start, 2 }, { f.data_length, 2 }, { f.fr_count, 4 },
        { f.fr_number, 4 }, { f.fr_total, 4 }, { f.fr_offset, 4 } },
    [CMD.SEND_UNSEQUENCED] = { { f.unseq_group, 2 }, { f.data_length, 2 } },
    [CMD.BANDWIDTH_LIMIT] = { { f.bw_in, 4 }, { f.bw_out, 4 } },
    [CMD.THROTTLE_CONFIGURE] = { { f.thr_int, 4 }, { f.thr_acc, 4 }, { f.thr_dec, 4 } },
    [CMD.SEND_UNRELIABLE_FRAGMENT] = { { f.fr_start, 2 }, { f.data_length, 2 }, { f.fr_count, 4 },
        { f.fr_number, 4 }, { f.fr_total, 4 }, { f.fr_offset, 4 } },
    [CMD.TERN_HELLO] = { { f.hello_features, 4 } },
    [CMD.ACK_RANGE] = { { f.ar_sent_time, 2 }, { f.ar_bitfield, 4 } },
    [CMD.TERN_EXT] = { { f.ext_kind, 1 }, { f.ext_flags, 1 }, { f.data_length, 2 } },
}

-- Adds one command at `offset` to `tree`; returns the offset after it, or nil when decoding
-- must stop (the expert info says why), and a short summary for the Info column.
local function dissect_command(tvb, pinfo, tree, offset, index, conv)
    local len = tvb:len()
    local remaining = len - offset
    if remaining < 4 then
        local item = tree:add(f.undecoded, tvb(offset, remaining))
        item:add_proto_expert_info(ef.truncated_command,
            string.format("Command header needs 4 bytes, %d left", remaining))
        return nil, "[truncated]"
    end
    local first = tvb(offset, 1):uint()
    local number = band(first, 0x0F)
    local channel = tvb(offset + 1, 1):uint()
    local seq = tvb(offset + 2, 2):uint()
    local name = cmd_names[number]
    local size = cmd_size[number]
    local span = size and math.min(size, remaining) or remaining
    local ctree = tree:add(f.command, tvb(offset, span))
    ctree:set_text(string.format("Command %d: %s", index, name or ("unknown (" .. number .. ")")))
    ctree:add(f.cmd, tvb(offset, 1))
    ctree:add(f.flag_ack, tvb(offset, 1))
    ctree:add(f.flag_unseq, tvb(offset, 1))
    if number == 6 or number == 8 then  -- SEND_RELIABLE, SEND_FRAGMENT
      ctree:add(f.flag_unordered, tvb(offset, 1))
      ctree:add(f.flag_sequenced, tvb(offset, 1))
    end
    local channel_item = ctree:add(f.channel, tvb(offset + 1, 1))
    if channel == SYSTEM_CHANNEL then channel_item:append_text(" (system)") end
    local seq_item = ctree:add(f.reliable_seq, tvb(offset + 2, 2))
    if not name then
        ctree:add_proto_expert_info(ef.unknown_command,
            string.format("Command number %d is not ENet's nor a Tern extension", number))
        if remaining > 4 then tree:add(f.undecoded, tvb(offset + 4, remaining - 4)) end
        return nil, "[unknown " .. number .. "]"
    end
    if remaining < size then
        ctree:add_proto_expert_info(ef.truncated_command,
            string.format("%s needs %d bytes, %d left", name, size, remaining))
        return nil, name .. " [truncated]"
    end
    if number == CMD.ACK_RANGE then seq_item:append_text(" (range base)") end
    if conv and conv.channel_count and channel ~= SYSTEM_CHANNEL and channel >= conv.channel_count then
        channel_item:add_proto_expert_info(ef.bad_channel,
            string.format("Channel %d, the handshake agreed on %d", channel, conv.channel_count))
        return nil, name .. " [bad channel]"
    end

    local values = {}
    local at = offset + 4
    for _, spec in ipairs(bodies[number]) do
        local field, width = spec[1], spec[2]
        ctree:add(field, tvb(at, width))
        values[field] = tvb(at, width):uint()
        at = at + width
    end

    local info = name
    local data_length = values[f.data_length]
    if data_length then
        if at + data_length > len then
            ctree:add_proto_expert_info(ef.payload_past,
                string.format("Data length %d, %d bytes left", data_length, len - at))
            if len > at then tree:add(f.undecoded, tvb(at, len - at)) end
            return nil, name .. " [payload past end]"
        end
        if data_length > 0 then ctree:add(f.payload, tvb(at, data_length)) end
        ctree:set_len(size + data_length)
        at = at + data_length
        info = string.format("%s ch%d #%d len=%d", name, channel, seq, data_length)
    elseif number == CMD.ACKNOWLEDGE then
        info = string.format("ACK ch%d #%d", channel, values[f.ack_seq])
    end

    if number == CMD.SEND_FRAGMENT or number == CMD.SEND_UNRELIABLE_FRAGMENT then
        local count, num = values[f.fr_count], values[f.fr_number]
        local total, off = values[f.fr_total], values[f.fr_offset]
        ctree:append_text(string.format(" (fragment %d of %d, offset %d of %d)", num, count, off, total))
        if count < 1 or count > MAX_FRAGMENT_COUNT or num >= count or total < count or off >= total
            or off + data_length > total then
            ctree:add_proto_expert_info(ef.bad_fragment)
        end
        info = string.format("%s ch%d %d/%d", name, channel, num, count)
    elseif number == CMD.TERN_HELLO then
        ctree:add(f.hello_sacks, tvb(offset + 4, 4))
        ctree:add(f.hello_nodelay, tvb(offset + 4, 4))
        ctree:add(f.hello_modes, tvb(offset + 4, 4))
    elseif number == CMD.ACK_RANGE then
        local bits = values[f.ar_bitfield]
        local acked = { tostring(seq) }
        for i = 0, 31 do
            if band(rshift(bits, i), 1) ~= 0 then acked[#acked + 1] = tostring((seq + 1 + i) % 65536) end
        end
        local item = ctree:add(f.ar_acked, tvb(offset + 2, 2), table.concat(acked, ","))
        item:set_generated()
        ctree:add(f.ar_count, tvb(offset + 6, 4), #acked):set_generated()
        info = string.format("ACK_RANGE ch%d #%d+%d", channel, seq, #acked - 1)
    elseif (number == CMD.CONNECT or number == CMD.VERIFY_CONNECT) and conv then
        -- The VERIFY's count (the server's answer) replaces the CONNECT's request.
        conv.connect_id = values[f.c_connect_id]
        conv.channel_count = values[f.c_channels]
    end
    ctree:append_text(string.format(", channel %d, seq %d", channel, seq))
    return at, info
end

-- The ENet personality: header, checksum, then commands until the end or the first one a
-- receiver would stop at.
local function dissect_enet(tvb, pinfo, root)
    local len = tvb:len()
    pinfo.cols.protocol = "Tern"
    local tree = root:add(tern, tvb())
    if len < 2 then
        tree:add_proto_expert_info(ef.truncated_header, "The peer word needs 2 bytes")
        pinfo.cols.info = "[truncated header]"
        return
    end
    local peer_word = tvb(0, 2):uint()
    local header = tree:add(f.peer_word, tvb(0, 2))
    local peer_item = header:add(f.peer_id, tvb(0, 2))
    if band(peer_word, MAX_PEER_ID) == MAX_PEER_ID then peer_item:append_text(" (none yet)") end
    header:add(f.session, tvb(0, 2))
    header:add(f.compressed, tvb(0, 2))
    header:add(f.has_sent_time, tvb(0, 2))
    local peer_id = band(peer_word, MAX_PEER_ID)

    local key = conversation_key(pinfo)
    local conv = conversations[key]
    if not conv then
        conv = {}
        conversations[key] = conv
    end

    local offset = 2
    if band(peer_word, HDR_SENT_TIME) ~= 0 then
        if len < 4 then
            tree:add_proto_expert_info(ef.truncated_header, "The sent time needs 2 more bytes")
            pinfo.cols.info = "[truncated header]"
            return
        end
        tree:add(f.sent_time, tvb(2, 2))
        offset = 4
    end
    local _, checksum = layout(tvb, pinfo, peer_word)
    if checksum then
        if len < offset + 4 then
            tree:add_proto_expert_info(ef.truncated_header, "The checksum needs 4 more bytes")
            pinfo.cols.info = "[truncated header]"
            return
        end
        local item = tree:add(f.checksum, tvb(offset, 4))
        local fill = nil
        if peer_id == MAX_PEER_ID then fill = 0 elseif conv.connect_id then fill = conv.connect_id end
        local status = 0
        if fill then
            if datagram_crc(tvb, offset, fill) == tvb(offset, 4):uint() then status = 1 else status = 2 end
        end
        tree:add(f.checksum_status, tvb(offset, 4), status):set_generated()
        if status == 2 then item:add_proto_expert_info(ef.checksum_bad) end
        if status == 1 then conv.checksum = true end
        offset = offset + 4
    end

    if band(peer_word, HDR_COMPRESSED) ~= 0 then
        tree:add_proto_expert_info(ef.compressed)
        if len > offset then tree:add(f.undecoded, tvb(offset, len - offset)) end
        pinfo.cols.info = "[compressed]"
        return
    end

    local infos = {}
    local index = 0
    while offset < len do
        index = index + 1
        local next_offset, info = dissect_command(tvb, pinfo, tree, offset, index, conv)
        infos[#infos + 1] = info
        if not next_offset then break end
        offset = next_offset
    end
    if index == 0 then
        tree:add_proto_expert_info(ef.truncated_command, "No command after the header")
    end
    tree:add(f.command_count, index):set_generated()
    tree:append_text(string.format(", peer %d, %d command(s)", peer_id, index))
    pinfo.cols.info = string.format("peer=%d %s", peer_id, table.concat(infos, ", "))
end

---------------------------------------------------------------------------------------------
-- Personalities. ENet 1.3 (with Tern's extensions) is the only one on the wire today.
-- KCP (issue 34): when that personality lands, add an entry here with its own
-- `looks_like(tvb)` (KCP's conv/cmd/frg/wnd/ts/sn/una/len segment header) and `dissect`
-- function, and put its fields under `tern.kcp.*`; the heuristic and the port table below
-- then try it in this order without further changes.
local personalities = {
    {
        name = "enet",
        looks_like = function(tvb, pinfo)
            local len = tvb:len()
            if len < 6 then return false end
            local peer_word = tvb(0, 2):uint()
            if band(peer_word, HDR_COMPRESSED) ~= 0 then return false end
            local peer_id = band(peer_word, MAX_PEER_ID)
            if peer_id == MAX_PEER_ID and band(peer_word, 0x3000) ~= 0 then return false end
            local off = 2
            if band(peer_word, HDR_SENT_TIME) ~= 0 then off = 4 end
            if walk_ok(tvb, off, peer_id) then return true end
            return len >= off + 8 and walk_ok(tvb, off + 4, peer_id)
        end,
        dissect = dissect_enet,
    },
}

local function dissect_any(tvb, pinfo, tree)
    local chosen = personalities[1]
    for _, p in ipairs(personalities) do
        if p.looks_like(tvb, pinfo) then
            chosen = p
            break
        end
    end
    local ok, err = pcall(chosen.dissect, tvb, pinfo, tree)
    if not ok then
        tree:add_proto_expert_info(ef.internal, tostring(err))
    end
    return tvb:len()
end

function tern.dissector(tvb, pinfo, tree)
    return dissect_any(tvb, pinfo, tree)
end

local function heuristic(tvb, pinfo, tree)
    if not tern.prefs.heuristic then return false end
    local ok, found = pcall(function()
        for _, p in ipairs(personalities) do
            if p.looks_like(tvb, pinfo) then return p end
        end
        return nil
    end)
    if not ok or not found then return false end
    -- The rest of the conversation (including datagrams the heuristic would refuse, such as
    -- malformed ones) then comes here directly.
    pinfo.conversation = tern
    dissect_any(tvb, pinfo, tree)
    return true
end

tern:register_heuristic("udp", heuristic)
udp_port_table:add_for_decode_as(tern)
