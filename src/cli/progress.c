/* progress.c: the progress line: composed to fit the terminal's width so that it never wraps (a
 * wrapped line cannot be redrawn with "\r" and leaves stale copies behind). */
#include "progress.h"

#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>
#include "../core/clock.h"

double progress_now(void) {
    return clock_seconds();
}

double progress_since_exec(void) {
    FILE *f = fopen("/proc/self/stat", "r");
    if (!f) return -1.0;
    char buf[1024];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    unsigned long long start = 0;
    /* after ") ": state is field 3, starttime field 22 */
    if (!p || sscanf(p + 2,
                     "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d "
                     "%*d %*d %llu",
                     &start) != 1)
        return -1.0;
    struct timespec ts;
    long hz = sysconf(_SC_CLK_TCK);
    if (hz <= 0 || clock_gettime(CLOCK_BOOTTIME, &ts) != 0) return -1.0;
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 - (double)start / (double)hz;
}

int progress_columns(void) {
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
    return 80;
}

void progress_format(char *out, int size, int columns, const char *prefix, double fraction,
                     const char *suffix) {
    int room = columns - 1; /* the last column would make some terminals wrap */
    if (room > size - 1) room = size - 1;
    if (room < 1) room = 1;
    int fixed = (int)strlen(prefix) + (int)strlen(suffix) + 4; /* " [" "] " */
    int bar = room - fixed;
    if (bar > 40) bar = 40;
    fraction = fraction < 0 ? 0 : fraction > 1 ? 1 : fraction;
    char line[1024];
    int used;
    if (bar >= 5) {
        char cells[41];
        int fill = (int)(bar * fraction);
        for (int i = 0; i < bar; i++) cells[i] = i < fill ? '#' : ' ';
        cells[bar] = 0;
        used = snprintf(line, sizeof line, "%s [%s] %s", prefix, cells, suffix);
    } else {
        used = snprintf(line, sizeof line, "%s %s", prefix, suffix);
    }
    if (used > room) line[room] = 0;
    snprintf(out, (size_t)size, "%s", line);
}

void progress_show(const char *prefix, double fraction, const char *suffix) {
    char line[1024];
    progress_format(line, sizeof line, progress_columns(), prefix, fraction, suffix);
    printf("\r%s\033[K", line);
    fflush(stdout);
}

void progress_clear(void) {
    printf("\r\033[K");
    fflush(stdout);
}
