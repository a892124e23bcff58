#include "common/signals.hpp"

#include <pthread.h>

#include <csignal>

namespace tern::app {

namespace {
volatile std::sig_atomic_t g_stop_signal = 0;

void on_stop_signal(int sig) { g_stop_signal = sig; }
}  // namespace

void install_stop_handler() {
  struct sigaction sa = {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool stop_requested() { return g_stop_signal != 0; }

void wait_for_stop() {
  sigset_t stop, old;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  // Blocked while the flag is checked, unblocked only inside sigsuspend: a signal between the
  // check and the wait is not lost.
  pthread_sigmask(SIG_BLOCK, &stop, &old);
  sigset_t wait = old;
  sigdelset(&wait, SIGINT);
  sigdelset(&wait, SIGTERM);
  while (g_stop_signal == 0) sigsuspend(&wait);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

int stop_signal() { return static_cast<int>(g_stop_signal); }
void clear_stop_request() { g_stop_signal = 0; }

}  // namespace tern::app
