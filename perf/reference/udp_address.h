/* HOST:PORT parsing for the raw UDP reference programs (raw-udp-echo, raw-udp-flood). */
#ifndef TERN_PERF_UDP_ADDRESS_H
#define TERN_PERF_UDP_ADDRESS_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* Parses "1.2.3.4:5" or "[::1]:5" into a sockaddr; returns its length or 0. */
static inline socklen_t parse_address(const char* text, struct sockaddr_storage* out) {
  char host[128];
  const char* colon = strrchr(text, ':');
  if (colon == NULL || (size_t)(colon - text) >= sizeof host) return 0;
  char* end = NULL;
  long port = strtol(colon + 1, &end, 10);
  if (*end != '\0' || port < 0 || port > 65535 || end == colon + 1) return 0;
  memcpy(host, text, (size_t)(colon - text));
  host[colon - text] = '\0';
  memset(out, 0, sizeof *out);
  if (host[0] == '[') {
    size_t n = strlen(host);
    if (n < 2 || host[n - 1] != ']') return 0;
    host[n - 1] = '\0';
    struct sockaddr_in6* s6 = (struct sockaddr_in6*)out;
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons((unsigned short)port);
    if (inet_pton(AF_INET6, host + 1, &s6->sin6_addr) != 1) return 0;
    return sizeof *s6;
  }
  struct sockaddr_in* s4 = (struct sockaddr_in*)out;
  s4->sin_family = AF_INET;
  s4->sin_port = htons((unsigned short)port);
  if (inet_pton(AF_INET, host, &s4->sin_addr) != 1) return 0;
  return sizeof *s4;
}

#endif
