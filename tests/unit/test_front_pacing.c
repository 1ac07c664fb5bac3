/* Unit tests of front/pacing.c on real loopback TCP sockets: what the socket takes at once is
 * large while the receiver keeps up, falls to (about) nothing once the receiver stops reading
 * and the kernel holds its low-water mark unsent, and comes back when the receiver reads; a
 * socket without TCP_INFO reports no room. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <arpa/inet.h>
#include <cmocka.h>
#include "test_util.h"
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "front/pacing.h"

#define LOWAT (16 * 1024)

/* A connected loopback pair: fds[0] sends (non-blocking), fds[1] receives. */
static void tcp_pair(int fds[2])
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    int l = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(l >= 0);
    assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(l, 1), 0);
    assert_int_equal(getsockname(l, (struct sockaddr *)&a, &al), 0);
    fds[0] = socket(AF_INET, SOCK_STREAM, 0);
    assert_int_equal(connect(fds[0], (struct sockaddr *)&a, sizeof(a)), 0);
    fds[1] = accept(l, NULL, NULL);
    assert_true(fds[1] >= 0);
    close(l);
    assert_int_equal(fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK), 0);
}

static void room_follows_the_receiver(void **state)
{
    (void)state;
    int fds[2];
    tcp_pair(fds);
    assert_int_equal(gw_pacing_set_lowat(fds[0], LOWAT), 0);
    /* idle: at least the low-water mark, plus the initial windows */
    size_t room = gw_pacing_room(fds[0], LOWAT);
    assert_true(room > LOWAT);
    /* the receiver reads nothing: write until the kernel takes no more */
    static uint8_t buf[64 * 1024];
    size_t sent = 0;
    for (;;) {
        ssize_t n = write(fds[0], buf, sizeof(buf));
        if (n < 0) {
            assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
            break;
        }
        sent += (size_t)n;
        assert_true(sent < (64u << 20)); /* the low-water mark stops it long before */
    }
    /* the receive window is full and the low-water mark reached: (about) nothing more now,
     * far less than what went */
    size_t full = gw_pacing_room(fds[0], LOWAT);
    assert_true(full < LOWAT);
    assert_true(sent > 4 * LOWAT);
    /* the receiver reads: the room comes back */
    size_t got = 0;
    while (got < sent) {
        ssize_t n = read(fds[1], buf, sizeof(buf));
        assert_true(n > 0);
        got += (size_t)n;
    }
    for (int i = 0; i < 100 && gw_pacing_room(fds[0], LOWAT) <= LOWAT; i++)
        usleep(1000); /* the window update is on its way */
    assert_true(gw_pacing_room(fds[0], LOWAT) > LOWAT);
    close(fds[0]);
    close(fds[1]);
}

static void no_tcp_no_room(void **state)
{
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    assert_int_equal(gw_pacing_room(sv[0], LOWAT), 0);
    assert_true(gw_pacing_set_lowat(sv[0], LOWAT) < 0);
    close(sv[0]);
    close(sv[1]);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(room_follows_the_receiver),
    cmocka_unit_test(no_tcp_no_room),
};

GW_TEST_MAIN(tests)
