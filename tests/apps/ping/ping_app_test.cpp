// Runs the real tern-ping binary (path in $TERN_PING): server and clients over loopback for
// every delivery, the failure exits, and the command-line contract (exit 2 + usage on stderr).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

extern char** environ;

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Generous: the budget is only there so a hang fails the test instead of the suite timeout.
constexpr auto kRunBudget = 60s;

std::string ping_binary() {
  const char* path = std::getenv("TERN_PING");
  return path != nullptr ? path : "";
}

// A child process with its stdout and stderr on pipes.
class Child {
 public:
  explicit Child(const std::vector<std::string>& args, const std::string& binary = ping_binary()) {
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) return;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, err[1], 2);
    std::vector<std::string> argv_store = args;
    argv_store.insert(argv_store.begin(), binary);
    std::vector<char*> argv;
    for (auto& a : argv_store) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
    ::close(out[1]);
    ::close(err[1]);
    out_fd_ = out[0];
    err_fd_ = err[0];
  }
  ~Child() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
    if (out_fd_ >= 0) ::close(out_fd_);
    if (err_fd_ >= 0) ::close(err_fd_);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  bool started() const { return pid_ > 0; }
  void signal(int sig) { ::kill(pid_, sig); }

  // Reads until stdout holds a full line or the deadline passes; returns that line.
  std::string read_line(Clock::time_point deadline) {
    while (Clock::now() < deadline) {
      if (const auto nl = out_.find('\n'); nl != std::string::npos) {
        std::string line = out_.substr(0, nl);
        out_.erase(0, nl + 1);
        return line;
      }
      if (!pump(deadline)) break;
    }
    return {};
  }

  // Collects all output and the exit status; -1 if it did not exit in time (then killed).
  int wait(Clock::time_point deadline) {
    while (Clock::now() < deadline && (out_fd_ >= 0 || err_fd_ >= 0)) pump(deadline);
    while (Clock::now() < deadline) {
      int status = 0;
      const pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        exited_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(5ms);
    }
    return -1;
  }

  const std::string& out() const { return out_; }
  const std::string& err() const { return err_; }

 private:
  // One poll over the open pipes; false once both are closed or the deadline passed.
  bool pump(Clock::time_point deadline) {
    pollfd fds[2];
    nfds_t n = 0;
    if (out_fd_ >= 0) fds[n++] = {out_fd_, POLLIN, 0};
    if (err_fd_ >= 0) fds[n++] = {err_fd_, POLLIN, 0};
    if (n == 0) return false;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    if (::poll(fds, n, static_cast<int>(std::min<long long>(left.count(), 100))) <= 0) return true;
    for (nfds_t i = 0; i < n; ++i) {
      if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const bool is_out = fds[i].fd == out_fd_;
      char buf[4096];
      const ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
      if (got > 0) {
        (is_out ? out_ : err_).append(buf, static_cast<std::size_t>(got));
      } else {
        ::close(fds[i].fd);
        (is_out ? out_fd_ : err_fd_) = -1;
      }
    }
    return true;
  }

  pid_t pid_ = -1;
  bool exited_ = false;
  int out_fd_ = -1;
  int err_fd_ = -1;
  std::string out_;
  std::string err_;
};

struct Outcome {
  int status;
  std::string out;
  std::string err;
};

Outcome run_ping(const std::vector<std::string>& args) {
  Child c(args);
  EXPECT_TRUE(c.started());
  const int status = c.wait(Clock::now() + kRunBudget);
  return {status, c.out(), c.err()};
}

class TernPing : public ::testing::Test {
 protected:
  void SetUp() override {
    if (ping_binary().empty()) GTEST_SKIP() << "TERN_PING is not set";
  }

  // Starts a server on an ephemeral loopback port; returns "127.0.0.1:PORT".
  std::string start_server(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--serve", "127.0.0.1:0"};
    args.insert(args.end(), extra.begin(), extra.end());
    server_ = std::make_unique<Child>(args);
    EXPECT_TRUE(server_->started());
    const std::string line = server_->read_line(Clock::now() + kRunBudget);
    // "serving 127.0.0.1:PORT"
    constexpr std::string_view kPrefix = "serving 127.0.0.1:";
    unsigned port = 0;
    char tail = 0;
    const bool ok = line.rfind(kPrefix, 0) == 0 &&
                    std::sscanf(line.c_str() + kPrefix.size(), "%u%c", &port, &tail) == 1 &&
                    port > 0 && port < 65536;
    EXPECT_TRUE(ok) << "server said: '" << line << "'";
    return "127.0.0.1:" + std::to_string(ok ? port : 1);
  }

  // SIGTERM: the server disconnects everyone, prints its summary and exits 0.
  void stop_server() {
    server_->signal(SIGTERM);
    EXPECT_EQ(server_->wait(Clock::now() + kRunBudget), 0) << server_->err();
    EXPECT_NE(server_->out().find("served signal=15 "), std::string::npos) << server_->out();
    EXPECT_EQ(server_->out().find("echo_failed=0 ") != std::string::npos, true) << server_->out();
    server_.reset();
  }

  static void expect_result(const Outcome& r, const std::string& delivery, int count, int size) {
    ASSERT_EQ(r.status, 0) << r.err;
    // rtt_us p50=X p90=X p99=X p99.9=X max=X count=N lost=N delivery=NAME size=B
    double pct[5] = {};
    unsigned long got_count = 0, lost = 0, got_size = 0;
    char name[32] = {};
    int consumed = 0;
    const int fields = std::sscanf(
        r.out.c_str(),
        "rtt_us p50=%lf p90=%lf p99=%lf p99.9=%lf max=%lf count=%lu lost=%lu delivery=%31s "
        "size=%lu\n%n",
        &pct[0], &pct[1], &pct[2], &pct[3], &pct[4], &got_count, &lost, name, &got_size, &consumed);
    ASSERT_EQ(fields, 9) << "stdout: '" << r.out << "'";
    EXPECT_EQ(static_cast<std::size_t>(consumed), r.out.size()) << "exactly one line: " << r.out;
    EXPECT_EQ(r.out.find('\n'), r.out.size() - 1);
    double prev = 0;
    for (double v : pct) {
      EXPECT_GT(v, 0.0);
      EXPECT_GE(v, prev) << "percentiles must not decrease";
      prev = v;
    }
    // One decimal, as documented.
    for (const char* key : {"p50=", "p90=", "p99=", "p99.9=", "max="}) {
      const auto at = r.out.find(key);
      ASSERT_NE(at, std::string::npos) << key;
      const auto space = r.out.find(' ', at);
      const auto dot = r.out.find('.', at + std::strlen(key));
      EXPECT_EQ(dot + 2, space) << key << " in " << r.out;
    }
    EXPECT_EQ(got_count, static_cast<unsigned long>(count));
    EXPECT_EQ(std::string(name), delivery);
    EXPECT_EQ(got_size, static_cast<unsigned long>(size));
  }

  std::unique_ptr<Child> server_;
};

TEST_F(TernPing, EveryDeliveryOverLoopback) {
  const std::string at = start_server();
  for (const char* delivery : {"reliable", "unreliable", "unsequenced"}) {
    SCOPED_TRACE(delivery);
    const Outcome r = run_ping({"--connect", at, "--count", "200", std::string("--") + delivery});
    expect_result(r, delivery, 200, 64);
  }
  stop_server();
}

// The load-generator mode against a 2-shard server: 200 connections from two client shards,
// 4 reliable messages in flight on each. On loopback nothing may be lost, so every message
// sent in the measured second comes back.
TEST_F(TernPing, FloodAgainstTwoShardsAccountsForEveryMessage) {
  for (const char* driver : {"socket", "uring"}) {
    SCOPED_TRACE(driver);
    const std::string at = start_server({"--shards", "2", "--driver", driver, "--pin", "off"});
    const Outcome r = run_ping({"--connect", at, "--flood", "--peers", "200", "--window", "4",
                                "--warmup", "0.3", "--duration", "1", "--reliable", "--shards", "2",
                                "--driver", driver, "--size", "32"});
    ASSERT_EQ(r.status, 0) << r.err;
    unsigned long peers = 0, connected = 0, sent = 0, received = 0, lost = 0;
    const auto at_flood = r.out.find("flood ");
    ASSERT_NE(at_flood, std::string::npos) << r.out;
    ASSERT_EQ(
        std::sscanf(r.out.c_str() + at_flood, "flood peers=%lu connected=%lu", &peers, &connected),
        2)
        << r.out;
    const auto field = [&](const char* key, unsigned long& v) {
      const auto k = r.out.find(key, at_flood);
      ASSERT_NE(k, std::string::npos) << key << " in " << r.out;
      v = std::strtoul(r.out.c_str() + k + std::strlen(key), nullptr, 10);
    };
    field(" sent=", sent);
    field(" received=", received);
    field(" lost=", lost);
    EXPECT_EQ(peers, 200u);
    EXPECT_EQ(connected, 200u);
    EXPECT_GT(sent, 200u * 4) << "fewer than one window per connection in a second";
    EXPECT_EQ(received, sent);
    EXPECT_EQ(lost, 0u);
    stop_server();
  }
}

TEST_F(TernPing, ChecksumsBigPayloadsAndHighChannel) {
  const std::string at = start_server({"--checksum", "--channels", "16", "--peers", "8"});
  const Outcome r = run_ping({"--connect", at, "--count", "200", "--warmup", "5", "--size", "5000",
                              "--channel", "15", "--checksum", "--unsequenced"});
  expect_result(r, "unsequenced", 200, 5000);
  const Outcome r2 =
      run_ping({"--connect=" + at, "--count=50", "--size=8", "--reliable", "--checksum"});
  expect_result(r2, "reliable", 50, 8);
  stop_server();
}

// --channel-options on both sides (the server's and the client's own switches; nothing on
// the wire): every ping still comes back, on a channel with switches and on one without.
TEST_F(TernPing, ChannelOptionsOnBothSides) {
  const std::string at =
      start_server({"--channels", "4", "--channel-options", "0-1=no-fast-retransmit,low",
                    "--channel-options", "1=no-delivery-modes,high"});
  for (const char* channel : {"1", "3"}) {
    SCOPED_TRACE(channel);
    const Outcome r = run_ping({"--connect", at, "--count", "200", "--channel", channel,
                                "--channel-options", "1,3=no-congestion-control,no-express"});
    expect_result(r, "reliable", 200, 64);
  }
  stop_server();
}

TEST_F(TernPing, NobodyListeningExitsOne) {
  const std::string at = start_server();
  stop_server();  // the port is free again and nothing answers there
  const Outcome r = run_ping({"--connect", at, "--timeout-ms", "300"});
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_FALSE(r.err.empty());
}

TEST_F(TernPing, ServerGoingAwayExitsOne) {
  const std::string at = start_server();
  Child client({"--connect", at, "--count", "1000000000", "--warmup", "0"});
  ASSERT_TRUE(client.started());
  std::this_thread::sleep_for(300ms);  // connected and pinging (or still connecting: also exit 1)
  stop_server();
  EXPECT_EQ(client.wait(Clock::now() + kRunBudget), 1) << client.err();
  EXPECT_TRUE(client.out().empty()) << client.out();
}

// --discover lists the server that answers (its --info, one line, newlines escaped) and exits
// 0; a server without --info stays silent and the client exits 1.
TEST_F(TernPing, DiscoverListsTheServerThatAnswers) {
  const std::string at = start_server({"--info", "name=arena\nplayers=0"});
  const Outcome r = run_ping({"--discover", at, "--timeout-ms", "1500"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.rfind("server " + at + " rtt_ms=", 0), 0u) << r.out;
  EXPECT_NE(r.out.find(" info=name=arena\\x0aplayers=0\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("discovered 1\n"), std::string::npos) << r.out;
  const Outcome small = run_ping({"--discover", at, "--size", "4", "--timeout-ms", "1500"});
  ASSERT_EQ(small.status, 0) << small.err;
  EXPECT_NE(small.out.find(" truncated info=name\n"), std::string::npos) << small.out;
  stop_server();

  const std::string quiet = start_server();
  const Outcome none = run_ping({"--discover", quiet, "--timeout-ms", "300"});
  EXPECT_EQ(none.status, 1);
  EXPECT_EQ(none.out, "discovered 0\n");
  stop_server();
}

// --path-mtu through tern-netem --mtu: the client finds what the proxy lets through (the
// negotiated 1400 is lost on a 1200 link, so it searches below it) and reports it.
TEST_F(TernPing, PathMtuThroughAnMtuLimit) {
  const char* netem = std::getenv("TERN_NETEM");
  if (netem == nullptr || *netem == '\0') GTEST_SKIP() << "TERN_NETEM is not set";
  const std::string at = start_server({"--path-mtu", "--pin", "off"});
  for (const int limit : {1200, 3000}) {
    SCOPED_TRACE(limit);
    Child proxy(
        {"--listen", "127.0.0.1:0", "--upstream", at, "--mtu", std::to_string(limit), "--quiet"},
        netem);
    ASSERT_TRUE(proxy.started());
    const std::string line =
        proxy.read_line(Clock::now() + kRunBudget);  // "listening A upstream B"
    const auto space = line.find(' ', 10);
    ASSERT_EQ(line.rfind("listening ", 0), 0u) << line;
    const std::string via = line.substr(10, space - 10);
    const Outcome r = run_ping({"--connect", via, "--count", "500", "--path-mtu"});
    ASSERT_EQ(r.status, 0) << r.err;
    const auto m = r.out.find(" mtu=");
    ASSERT_NE(m, std::string::npos) << r.out;
    const int found = std::atoi(r.out.c_str() + m + 5);
    EXPECT_LE(found, limit) << r.out;
    EXPECT_GE(found, limit - 16) << r.out;
  }
  stop_server();
}

TEST_F(TernPing, BadCommandLinesExitTwoWithUsage) {
  const std::vector<std::vector<std::string>> bad = {
      {},
      {"--bogus"},
      {"--discover", "127.0.0.1:1", "--count", "5"},
      {"--discover", "0.0.0.0:7777"},
      {"positional"},
      {"--serve"},
      {"--connect"},
      {"--serve", "127.0.0.1:1", "--connect", "127.0.0.1:1"},
      {"--connect", "nonsense"},
      {"--connect", "127.0.0.1"},
      {"--connect", "[::1:5"},
      {"--serve", "127.0.0.1:70000"},
      {"--connect", "127.0.0.1:1", "--count"},
      {"--connect", "127.0.0.1:1", "--count", "ten"},
      {"--connect", "127.0.0.1:1", "--count", "0"},
      {"--connect", "127.0.0.1:1", "--size", "7"},
      {"--connect", "127.0.0.1:1", "--channel", "255"},
      {"--connect", "127.0.0.1:1", "--reliable", "--unreliable"},
      {"--connect", "127.0.0.1:1", "--checksum=yes"},
      {"--serve", "127.0.0.1:1", "--count", "5"},
      {"--serve", "127.0.0.1:1", "--channels", "256"},
      {"--connect", "127.0.0.1:1", "--peers", "5"},
      {"--connect", "127.0.0.1:1", "--channel-options", "1=bogus"},
      {"--connect", "127.0.0.1:1", "--channel-options", "255=low"},
      {"--connect", "127.0.0.1:1", "--channel-options", "no-redundancy"},
      {"--connect", "127.0.0.1:1", "--channel-options", "1="},
  };
  for (const auto& args : bad) {
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    SCOPED_TRACE(joined);
    const Outcome r = run_ping(args);
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find("usage:"), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

TEST_F(TernPing, HelpGoesToStdout) {
  const Outcome r = run_ping({"--help"});
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out.rfind("usage:", 0), 0u) << r.out;
  EXPECT_TRUE(r.err.empty()) << r.err;
}

}  // namespace
