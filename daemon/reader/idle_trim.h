/* A reader at rest gives its memory back. Its caches only bridge
 * neighbouring requests (the kernel keeps what was read), yet a full one
 * stays full: a reader held 7.3 MiB PSS after one import, idle for hours
 * (docs/performance.md, section 24). A thread of its own, asleep while
 * every cache is empty, sweeps the caches every interval once a block is
 * stored: a cache nobody used for a whole interval is emptied, and what
 * was freed goes back to the system (malloc_trim). A job's caches are
 * thus gone one to two intervals after its last read, and a reader that
 * holds nothing is never woken. */
#ifndef SQUASH_READER_IDLE_TRIM_H
#define SQUASH_READER_IDLE_TRIM_H

/* The interval squash-reader uses. */
#define IDLE_TRIM_MS 5000

/* Starts the sweeping thread, every interval_ms (> 0). 0, or an errno. */
int idle_trim_start(unsigned interval_ms);

/* Ends it (waits for a sweep under way); nothing when it never started. */
void idle_trim_stop(void);

#endif
