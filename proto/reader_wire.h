/* What squashd and a squash-reader serving several mounts (`--serve`, daemon/reader/serve.h)
 * say to each other over their socket pair (SOCK_SEQPACKET, one message
 * per datagram). squashd sends a serve_request with two descriptors (the
 * image, then the mounted /dev/fuse connection); the reader answers each
 * with a serve_reply carrying the same id, except a SERVE_RESUME one,
 * which squashd does not wait for (a reader failing one exits). Both sides treat what they read
 * as untrusted: the reader runs as the user, who may ptrace it. */
#ifndef SQUASH_READER_WIRE_H
#define SQUASH_READER_WIRE_H

#include <stdint.h>

#define SERVE_WIRE_MAGIC 0x73716d31u /* "sqm1" */

/* The connection answered FUSE_INIT to a reader that died: take it over
 * and have the kernel resend what it left unanswered (session.h). */
#define SERVE_RESUME 1u

/* After the reader's answer to a single image's serve_request (not a
 * take-over), squashd sends a serve_request of the same id with this
 * flag and one descriptor: the mount's root (O_PATH), for the reader to
 * walk the image's start profile through (daemon/reader/start_profile.h).
 * No answer. A reader that predates it ignores the message (one
 * descriptor, not two) and closes the descriptor. */
#define SERVE_ROOT 4u

/* The most mounts squashd hands one reader; a user's mounts past that
 * many go to another reader of the user. libfuse makes a thread-specific
 * key per session (pthread_key_create) and a process has PTHREAD_KEYS_MAX
 * of them (1,024 with glibc), the reader's zstd decompressor's among
 * them: one reader serving the 1,024 images a job may have ran out, and
 * its zstd blocks all failed (EIO). The reader itself refuses a mount past
 * SERVE_MOUNTS_REFUSE (its keys nearly gone), with a reason squashd logs
 * and passes on to the job. */
#define SERVE_MOUNTS_MAX 512
#define SERVE_MOUNTS_REFUSE 1000

/* A union of images served as one mount (daemon/reader/union_tree.h: the
 * images merged as overlayfs merges lower layers, the last on top).
 * squashd sends it as serve_union_part messages of the same id, in order,
 * each with up to SERVE_UNION_PART image descriptors (SCM_RIGHTS takes at
 * most 253 a message) and the last also with the mounted /dev/fuse
 * descriptor after its images; the reader answers once, after the last
 * part, with a serve_reply. SERVE_RESUME may be set too (on every part).
 * A reader that predates unions ignores such messages (their size is not
 * a serve_request's) and never answers, so squashd sends them only to a
 * reader whose -h lists --union (daemon/mount/fuse_reader.c's probe). */
#define SERVE_UNION 2u
#define SERVE_UNION_PART 248u
#define SERVE_UNION_MAX 4096u      /* images in one union (UNION_MAX_LAYERS) */
#define SERVE_UNION_PENDING 16u    /* unions whose parts are still coming */

/* squash-reader --serve --poll-us (squashd.conf reader_poll_us): how long
 * the worker that answered a scan's request polls for the next one;
 * 200 us catches a scan's next request (docs/performance.md, section 13). */
#define SERVE_POLL_US_DEFAULT 200
#define SERVE_POLL_US_MAX 1000

struct serve_union_part {
	uint32_t magic;
	uint32_t id;
	uint32_t flags;      /* SERVE_UNION, and SERVE_RESUME for a take-over */
	uint32_t images;     /* images in the whole union, 1..SERVE_UNION_MAX */
	uint32_t first;      /* the union's index of this part's first image */
};

struct serve_request {
	uint32_t magic;
	uint32_t id;
	uint32_t flags;
};

struct serve_reply {
	uint32_t magic;
	uint32_t id;
	int32_t error;       /* 0, or a positive errno */
	char message[244];   /* why, NUL-terminated, when error != 0 */
};

#endif
