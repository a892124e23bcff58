// drivers/factory: rt::open_driver opens every kind, or says why it cannot.
#include "driver_factory.hpp"
#include "sim_network.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace tern {
namespace {

TEST(DriverFactory, NamesRoundTrip) {
  for (const rt::DriverKind k :
       {rt::DriverKind::socket, rt::DriverKind::uring, rt::DriverKind::dpdk, rt::DriverKind::sim}) {
    const auto parsed = drv::parse_driver_kind(drv::driver_kind_name(k));
    ASSERT_TRUE(parsed.has_value()) << drv::driver_kind_name(k);
    EXPECT_EQ(*parsed, k);
  }
  EXPECT_FALSE(drv::parse_driver_kind("kernel").has_value());
  EXPECT_TRUE(drv::driver_built(rt::DriverKind::socket));
  EXPECT_TRUE(drv::driver_built(rt::DriverKind::sim));
}

TEST(DriverFactory, OpensASocketWithTheSpecsAddress) {
  rt::DriverSpec spec;
  spec.kind = rt::DriverKind::socket;
  spec.bind = *Endpoint::parse("127.0.0.1:0");
  std::string error;
  std::unique_ptr<rt::Driver> d = rt::open_driver(spec, error);
  ASSERT_NE(d, nullptr) << error;
  EXPECT_EQ(d->name(), "socket");
  EXPECT_EQ(d->local_endpoint().addr, spec.bind.addr);
  EXPECT_NE(d->local_endpoint().port, 0);
}

TEST(DriverFactory, UringRunsWhateverTheBuildAndKernelAllow) {
  rt::DriverSpec spec;
  spec.kind = rt::DriverKind::uring;
  spec.bind = *Endpoint::parse("127.0.0.1:0");
  std::string error;
  std::unique_ptr<rt::Driver> d = rt::open_driver(spec, error);
  ASSERT_NE(d, nullptr) << error;
  // Without liburing (or a kernel that refuses the ring) the socket driver stands in.
  if (!drv::driver_built(rt::DriverKind::uring)) {
    EXPECT_EQ(d->name(), "socket");
  }
  EXPECT_TRUE(d->name() == "uring" || d->name() == "socket") << d->name();
}

TEST(DriverFactory, DpdkRefusesPortZeroOrAMissingDriver) {
  rt::DriverSpec spec;
  spec.kind = rt::DriverKind::dpdk;
  spec.bind = Endpoint::v4(0x0a000001, 0);
  std::string error;
  EXPECT_EQ(rt::open_driver(spec, error), nullptr);
  EXPECT_FALSE(error.empty());
}

TEST(DriverFactory, SimAttachesToTheGivenNetwork) {
  drv::SimNetwork net(7);
  rt::DriverSpec spec;
  spec.kind = rt::DriverKind::sim;
  spec.bind = *Endpoint::parse("10.0.0.1:5000");
  std::string error;
  EXPECT_EQ(rt::open_driver(spec, error), nullptr) << "no network given";
  EXPECT_NE(error.find("sim_network"), std::string::npos) << error;

  spec.sim_network = &net;
  error.clear();
  std::unique_ptr<rt::Driver> d = rt::open_driver(spec, error);
  ASSERT_NE(d, nullptr) << error;
  EXPECT_EQ(d->name(), "sim");
  EXPECT_EQ(d->local_endpoint(), spec.bind);
  // The address is taken now: a second attach is refused, with a reason instead of a throw.
  EXPECT_EQ(rt::open_driver(spec, error), nullptr);
  EXPECT_FALSE(error.empty());
}

}  // namespace
}  // namespace tern
