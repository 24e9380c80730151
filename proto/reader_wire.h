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
