/* randread's op loop in C (workloads/native/__init__.py builds and loads it): per op one
 * pread into the caller's buffer (or, with `map`, a copy from that mapping of the file) between
 * two CLOCK_MONOTONIC reads (the clock of Python's time.monotonic_ns), the two times stored into
 * the caller's arrays. Returns when the offsets run out or an op ends at or after stop_ns (the
 * caller's next tick), with the number of ops done; on a failed read, that number with *error
 * set to errno (the failed op not counted). */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static inline int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t sb_read_ops(int fd, const char *map, void *buffer, int64_t size, const int64_t *offsets,
                    int64_t count, int64_t *starts, int64_t *ends, int64_t stop_ns, int *error)
{
    *error = 0;
    for (int64_t i = 0; i < count; i++) {
        int64_t t0 = now_ns();
        ssize_t got = size;
        if (map)
            memcpy(buffer, map + offsets[i], (size_t)size);
        else
            got = pread(fd, buffer, (size_t)size, (off_t)offsets[i]);
        int64_t t1 = now_ns();
        if (got < 0) {
            *error = errno;
            return i;
        }
        starts[i] = t0;
        ends[i] = t1;
        if (t1 >= stop_ns)
            return i + 1;
    }
    return count;
}
