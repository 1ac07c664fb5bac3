/* h2/defaults.h — the HTTP/2 defaults of the gateway, in one place: gw_h2_options_default()
 * (the engine) and the config loader (the `h2:` section of config/README.md) both take them
 * from here. Macros only, so that config/ can read them without linking h2/. */
#ifndef GW_H2_DEFAULTS_H
#define GW_H2_DEFAULTS_H

#define GW_H2_DEF_MAX_CONCURRENT_STREAMS 128 /* SETTINGS_MAX_CONCURRENT_STREAMS */
#define GW_H2_DEF_INITIAL_WINDOW_SIZE (256 * 1024)
#define GW_H2_DEF_CONNECTION_WINDOW_SIZE (1024 * 1024)
#define GW_H2_DEF_MAX_FRAME_SIZE 16384 /* RFC 9113 §6.5.2 initial value and minimum */
#define GW_H2_DEF_HEADER_TABLE_SIZE 4096
#define GW_H2_DEF_MAX_HEADER_LIST_SIZE (64 * 1024)
#define GW_H2_DEF_SETTINGS_TIMEOUT_MS 10000
#define GW_H2_DEF_MAX_REQUESTS_PER_CONNECTION 100000
#define GW_H2_DEF_RESET_BUDGET 200 /* stream resets per reset window (rapid reset) */
#define GW_H2_DEF_RESET_WINDOW_MS 10000
#define GW_H2_DEF_CONTROL_FRAME_BUDGET 1000
#define GW_H2_DEF_EMPTY_FRAME_BUDGET 100
#define GW_H2_DEF_MAX_QUEUED_CONTROL 1000
#define GW_H2_DEF_MAX_PRIORITY_NODES 0 /* 0: derived from max_concurrent_streams */
#define GW_H2_DEF_MAX_PUSHES 32        /* PUSH_PROMISEs per connection (RFC 9113 §8.4) */
/* The front's send pacing (front/h2_stream.c): DATA framed beyond what the socket has taken,
 * and the socket's TCP_NOTSENT_LOWAT, while streams of different urgencies are live and while
 * they are all of one (bulk). */
#define GW_H2_DEF_FRAME_AHEAD (32 * 1024)
#define GW_H2_DEF_NOTSENT_LOWAT (16 * 1024)
#define GW_H2_DEF_BULK_LOWAT (128 * 1024)

#endif
