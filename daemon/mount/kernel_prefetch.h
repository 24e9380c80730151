/* Reading a trusted image's start profile ahead after its kernel mount
 * (squash-pack --profile; docs/performance.md, section 18). The loop device
 * reads the image file through the node's page cache, so the parts of the
 * image the profile names, asked for at once in large reads in flight
 * together, are there before the job's start asks for them one round trip
 * at a time (Lustre, GPFS). squash-reader --prefetch does it: a process the
 * spawner makes and squashd never waits for, on squashd's own descriptor
 * of the image, as IDENTITY_NOBODY, that ends by itself (it only asks
 * the kernel to read) and is ended by its own alarm after
 * KERNEL_PREFETCH_MAX_S if the image's file system hangs; without squashd's
 * OOM protection. It then walks the profile through the mount (--walk,
 * reader/start_profile.h: the kernel's dentries, inodes and the small
 * files' pages made beside the start, section 29). An image without a
 * profile costs it one lookup; without a spawner nothing is read ahead. The caller bounds how many run
 * (core/kernel_prefetches.h) by the end of the answer socket it gets back,
 * which the process holds open until it exits. */
#ifndef SQUASHD_KERNEL_PREFETCH_H
#define SQUASHD_KERNEL_PREFETCH_H

#include <stdbool.h>

#include "process/spawner.h"

#define KERNEL_PREFETCH_MAX_S 60

/* Starts squash-reader (reader_path) --prefetch on image_fd, which stays
 * the caller's, and --walk through mount_point, the image's mount (NULL:
 * no walk; the process opens it as root before it drops to nobody).
 * Never blocks on the image; failures are logged at debug level only
 * (nothing depends on it). Returns the caller's end of the process's
 * answer socket, or -1 when nothing was started. */
int kernel_prefetch_start(const char *reader_path, int image_fd, const char *mount_point);

/* Whether the process behind held (kernel_prefetch_start's answer) has
 * ended, or was never made; never blocks. */
bool kernel_prefetch_ended(int held);

/* The pidfd of the process behind held, from the spawner's first message
 * on it (waiting up to timeout_ms), or -1. Once: the message is taken. */
int kernel_prefetch_pidfd(int held, int timeout_ms);

/* The process as the spawner runs it (register as SPAWNER_KERNEL_PREFETCH). */
extern const struct spawner_op kernel_prefetch_spawner_op;

#endif
