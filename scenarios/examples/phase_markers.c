/* memrel's phase markers from C: one JSON line per phase edge on the
 * descriptor memrel names in MEMREL_EVENT_FD (nothing happens without it).
 * A line needs only the phase and the edge: memrel numbers the cycles, and
 * reads the program's memory when a line arrives. Sending the program's own
 * reading (/proc/self/statm, as here) pins it to the edge itself: a program
 * that frees right after "load end" would otherwise race memrel's reading.
 *
 *   cc -O2 -o phase_markers phase_markers.c && memrel exec -- ./phase_markers
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void mark(const char *phase, const char *edge) {
    const char *fd = getenv("MEMREL_EVENT_FD");
    if (fd == NULL) return;
    unsigned long size = 0, resident = 0, shared = 0, page = (unsigned long)sysconf(_SC_PAGESIZE);
    FILE *statm = fopen("/proc/self/statm", "r");
    if (statm != NULL) {
        if (fscanf(statm, "%lu %lu %lu", &size, &resident, &shared) != 3) resident = shared = 0;
        fclose(statm);
    }
    char line[256];
    int n = snprintf(line, sizeof line,
                     "{\"v\":1,\"type\":\"phase\",\"data\":{\"phase\":\"%s\",\"edge\":\"%s\","
                     "\"memory\":{\"rss_bytes\":%lu,\"anon_bytes\":%lu,\"file_bytes\":%lu}}}\n",
                     phase, edge, resident * page, (resident - shared) * page, shared * page);
    if (write(atoi(fd), line, (size_t)n) != n) perror("memrel channel");
}

int main(void) {
    size_t bytes = (size_t)128 << 20;
    mark("baseline", "begin"); usleep(200000); mark("baseline", "end");
    for (int cycle = 0; cycle < 2; cycle++) {
        mark("load", "begin");
        char *model = malloc(bytes);
        if (model == NULL) return 1;
        /* Touch every page (through volatile: a memset of memory that is
         * never read is dropped by the compiler). */
        for (size_t i = 0; i < bytes; i += 4096) ((volatile char *)model)[i] = 1;
        mark("load", "end");
        mark("unload", "begin"); free(model); mark("unload", "end");
        mark("settle", "begin"); usleep(200000); mark("settle", "end");
    }
    return 0;
}
