// [dpdk] TOML section -> drv::DpdkConfig.
#include "dpdk_config.hpp"

#include <cstdint>
#include <initializer_list>
#include <string_view>

namespace tern::drv {

namespace {

class Reader {
 public:
  Reader(const toml::table& t, const std::string& where, std::string& error)
      : t_(t), where_(where), error_(error) {}

  bool fail(std::string_view key, const std::string& why) {
    error_ = where_ + ": dpdk." + std::string(key) + ": " + why;
    return false;
  }

  bool only(std::initializer_list<std::string_view> known) {
    for (const auto& [k, v] : t_) {
      bool found = false;
      for (std::string_view name : known) found = found || k.str() == name;
      if (!found) return fail(k.str(), "unknown key");
    }
    return true;
  }

  template <class T>
  bool integer(const char* key, T& out, std::int64_t min, std::int64_t max) {
    const toml::node* n = t_.get(key);
    if (n == nullptr) return true;
    const auto v = n->value_exact<std::int64_t>();
    if (!v) return fail(key, "must be an integer");
    if (*v < min || *v > max)
      return fail(key, "must be between " + std::to_string(min) + " and " + std::to_string(max));
    out = static_cast<T>(*v);
    return true;
  }

  bool string(const char* key, std::string& out, bool& present) {
    present = false;
    const toml::node* n = t_.get(key);
    if (n == nullptr) return true;
    const auto v = n->value_exact<std::string>();
    if (!v) return fail(key, "must be a string");
    out = *v;
    present = true;
    return true;
  }

  bool boolean(const char* key, bool& out) {
    const toml::node* n = t_.get(key);
    if (n == nullptr) return true;
    const auto v = n->value_exact<bool>();
    if (!v) return fail(key, "must be true or false");
    out = *v;
    return true;
  }

  bool strings(const char* key, std::vector<std::string>& out) {
    const toml::node* n = t_.get(key);
    if (n == nullptr) return true;
    const toml::array* a = n->as_array();
    if (a == nullptr) return fail(key, "must be an array of strings");
    std::vector<std::string> v;
    for (const toml::node& e : *a) {
      const auto s = e.value_exact<std::string>();
      if (!s) return fail(key, "must be an array of strings");
      v.push_back(*s);
    }
    out = std::move(v);
    return true;
  }

 private:
  const toml::table& t_;
  const std::string& where_;
  std::string& error_;
};

}  // namespace

bool dpdk_config_from_toml(const toml::table& section, const std::string& where, DpdkConfig& out,
                           std::string& error) {
  Reader r(section, where, error);
  // Formatted by hand: clang-format puts each of 20 list items on a line of its own.
  // clang-format off
  if (!r.only({"port", "ip", "gateway", "gateway_mac", "mac", "vlan", "eal_args", "lcores",
               "pci_allow", "hugepages", "memory_mb", "mbufs", "rx_descriptors", "tx_descriptors",
               "checksum_offload", "udp_checksum", "software_steering", "poll_sleep_us",
               "arp_queue", "static_arp"}))
    return false;
  // clang-format on
  DpdkConfig c = out;
  std::string text;
  bool present = false;
  if (!r.string("port", c.port, present)) return false;
  if (!r.string("ip", text, present)) return false;
  if (present && !parse_ipv4_prefix(text, c.link)) return r.fail("ip", "wants A.B.C.D/NN");
  if (!r.string("gateway", text, present)) return false;
  if (present) {
    net::LinkConfig gw;
    if (!parse_ipv4_prefix(text, gw) || gw.ipv4_prefix_len != 32)
      return r.fail("gateway", "wants A.B.C.D");
    c.link.ipv4_gateway = gw.ipv4;
  }
  if (!r.string("gateway_mac", text, present)) return false;
  if (present) {
    c.gateway_mac = parse_mac(text);
    if (!c.gateway_mac) return r.fail("gateway_mac", "wants aa:bb:cc:dd:ee:ff");
  }
  if (!r.string("mac", text, present)) return false;
  if (present) {
    const auto mac = parse_mac(text);
    if (!mac || mac->is_multicast() || mac->is_zero())
      return r.fail("mac", "wants a unicast aa:bb:cc:dd:ee:ff");
    c.link.mac = *mac;
  }
  std::vector<std::string> neighbours;
  if (!r.strings("static_arp", neighbours)) return false;
  if (section.get("static_arp") != nullptr) c.static_arp.clear();
  for (const std::string& entry : neighbours) {
    const std::size_t space = entry.find(' ');
    net::LinkConfig ip;
    const auto mac = space == std::string::npos ? std::nullopt : parse_mac(entry.substr(space + 1));
    if (space == std::string::npos || !parse_ipv4_prefix(entry.substr(0, space), ip) ||
        ip.ipv4_prefix_len != 32 || !mac || mac->is_multicast())
      return r.fail("static_arp", "entries are \"A.B.C.D aa:bb:cc:dd:ee:ff\", got '" + entry + "'");
    c.static_arp.emplace_back(ip.ipv4, *mac);
  }
  if (!r.string("lcores", c.lcores, present)) return false;
  if (present &&
      (c.lcores.empty() || c.lcores.find_first_not_of("0123456789,-") != std::string::npos))
    return r.fail("lcores", "wants a core list like \"2\" or \"2-3,6\", got '" + c.lcores + "'");
  if (!r.strings("pci_allow", c.pci_allow)) return false;
  for (const std::string& a : c.pci_allow) {
    if (a.empty() || a.find_first_not_of("0123456789abcdefABCDEF:.") != std::string::npos ||
        a.find(':') == std::string::npos)
      return r.fail("pci_allow",
                    "entries are PCI addresses like \"0000:03:00.0\", got '" + a + "'");
  }
  bool huge = !c.no_huge;
  if (!r.integer("vlan", c.link.vlan, 0, net::kMaxVlanId) || !r.strings("eal_args", c.eal_args) ||
      !r.boolean("hugepages", huge) || !r.integer("memory_mb", c.memory_mb, 64, 1 << 20) ||
      !r.integer("mbufs", c.mbufs, 2048, 1 << 24) ||
      !r.integer("rx_descriptors", c.rx_descriptors, 64, 32768) ||
      !r.integer("tx_descriptors", c.tx_descriptors, 64, 32768) ||
      !r.boolean("checksum_offload", c.checksum_offload) ||
      !r.boolean("udp_checksum", c.udp_checksum) ||
      !r.boolean("software_steering", c.software_steering) ||
      !r.integer("poll_sleep_us", c.poll_sleep_us, 1, 1'000'000) ||
      !r.integer("arp_queue", c.arp_queue, 0, 4096))
    return false;
  c.no_huge = !huge;
  out = std::move(c);
  return true;
}

bool load_dpdk_config(const std::string& path, DpdkConfig& out, std::string& error) {
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    error = path + ": " + std::string(e.description());
    return false;
  }
  const toml::node* n = root.get("dpdk");
  if (n == nullptr || !n->is_table()) {
    error = path + ": no [dpdk] table";
    return false;
  }
  return dpdk_config_from_toml(*n->as_table(), path, out, error);
}

}  // namespace tern::drv
