/* HOST:PORT parsing shared by the libenet reference programs. */
#ifndef TERN_PERF_REFERENCE_ENET_ENDPOINT_H
#define TERN_PERF_REFERENCE_ENET_ENDPOINT_H

#include <enet/enet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Parses "HOST:PORT" into an ENetAddress (IPv4 only: libenet's address type). A listener
 * (`listening` != 0) also accepts "*" or "0.0.0.0" for any address and port 0 for an
 * ephemeral one; a client needs a real port. Returns 0, or -1 when malformed. */
static inline int parse_enet_endpoint(const char* text, ENetAddress* out, int listening) {
  const char* colon = strrchr(text, ':');
  if (colon == NULL || colon == text || colon[1] == '\0') return -1;
  char* end = NULL;
  errno = 0;
  unsigned long port = strtoul(colon + 1, &end, 10);
  if (errno != 0 || *end != '\0' || port > 65535 || (port == 0 && !listening)) return -1;
  char host[256];
  size_t len = (size_t)(colon - text);
  if (len >= sizeof host) return -1;
  memcpy(host, text, len);
  host[len] = '\0';
  if (listening && (strcmp(host, "*") == 0 || strcmp(host, "0.0.0.0") == 0)) {
    out->host = ENET_HOST_ANY;
  } else if (enet_address_set_host(out, host) != 0) {
    return -1;
  }
  out->port = (enet_uint16)port;
  return 0;
}

#endif
