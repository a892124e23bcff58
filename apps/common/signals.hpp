// Graceful stop on SIGINT/SIGTERM for the long-running apps.
//
// The handler only records the signal; the app's service loop notices within one service
// timeout and shuts down in order (disconnect peers, flush, print a summary).
#pragma once

namespace tern::app {

// Installs the handler for SIGINT and SIGTERM. Without SA_RESTART, so a blocking wait in a
// driver returns early with EINTR instead of sleeping out its timeout.
void install_stop_handler();
bool stop_requested();
// Sleeps until a stop signal arrives, without waking in between (a thread that only waits
// for the signal, as tern-ping --serve's main thread, should not cost an idle server wake-ups).
void wait_for_stop();
int stop_signal();          // the signal that asked to stop, 0 if none
void clear_stop_request();  // tests and multi-phase apps

}  // namespace tern::app
