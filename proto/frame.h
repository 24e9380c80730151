/* Framing of squashd messages: defined once, used by every peer.
 *
 * A frame is one SOCK_SEQPACKET message: an 8-byte header followed by a
 * protobuf payload. Header: bytes 0-3 magic "SQSH", bytes 4-5 protocol
 * version (big-endian), bytes 6-7 frame kind (big-endian). A whole frame is
 * at most SQUASH_FRAME_MAX bytes; receivers read into a fixed buffer of that
 * size and treat a longer datagram (MSG_TRUNC) as an error, so nothing is
 * ever allocated from a length the peer chose. */
#ifndef SQUASH_FRAME_H
#define SQUASH_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define SQUASH_FRAME_MAGIC "SQSH"
/* The wire protocol's version, in every frame's header. 2 since
 * slurm-squash 0.1.0. It changes only when a peer of the previous version
 * could no longer understand a message; compatible growth (new optional
 * fields, new request kinds, new statuses, see proto/squash.proto) keeps
 * it. Whatever the version, Response fields 1 (status) and 2 (message)
 * and VERSION_MISMATCH keep their meaning: squashd answers a peer of
 * another version in that peer's version with them, so the peer can show
 * why (docs/architecture.md, "Versions"). */
#define SQUASH_PROTOCOL_VERSION 2
#define SQUASH_FRAME_HEADER_SIZE 8
/* Large enough for the largest request the documented limits allow
 * (SQUASH_MAX_IMAGES images, image and target each up to SQUASH_PATH_MAX-1
 * bytes: see imagespec.h) and below the default unix socket send buffer
 * (net.core.wmem_default, 208 KiB), so one datagram always carries it. */
#define SQUASH_FRAME_MAX (192 * 1024)

enum squash_frame_kind {
	SQUASH_FRAME_REQUEST = 1,  /* payload: squash.SignedRequest */
	SQUASH_FRAME_RESPONSE = 2, /* payload: squash.Response */
};

/* Results of the frame functions (0 is success, the rest are negative). */
enum squash_frame_error {
	SQUASH_FRAME_OK = 0,
	SQUASH_FRAME_ESHORT = -1,     /* shorter than the header */
	SQUASH_FRAME_EMAGIC = -2,     /* not a squashd frame */
	SQUASH_FRAME_EVERSION = -3,   /* other protocol version (see *peer_version) */
	SQUASH_FRAME_EKIND = -4,      /* unexpected frame kind */
	SQUASH_FRAME_ETOOBIG = -5,    /* longer than SQUASH_FRAME_MAX */
	SQUASH_FRAME_EIO = -6,        /* socket error, errno kept */
	SQUASH_FRAME_ETIMEDOUT = -7,  /* peer sent nothing in time */
	SQUASH_FRAME_ECLOSED = -8,    /* peer closed the connection */
};

/* Writes header + payload into buf (capacity cap). Returns the frame length,
 * or SQUASH_FRAME_ETOOBIG when it would not fit in cap or SQUASH_FRAME_MAX. */
long squash_frame_encode(uint8_t *buf, size_t cap, uint16_t kind,
			 const uint8_t *payload, size_t payload_len);

/* Checks a received frame. On success points *payload into buf. When the
 * version differs, returns SQUASH_FRAME_EVERSION and stores it in
 * *peer_version (which may be NULL). */
int squash_frame_parse(const uint8_t *buf, size_t len, uint16_t expect_kind,
		       const uint8_t **payload, size_t *payload_len,
		       uint16_t *peer_version);

/* Sends one frame on a SOCK_SEQPACKET socket (MSG_NOSIGNAL). */
int squash_frame_send(int fd, uint16_t kind, const uint8_t *payload,
		      size_t payload_len);

/* The same with another version in the header: only to answer a peer of
 * that version VERSION_MISMATCH. */
int squash_frame_send_version(int fd, uint16_t version, uint16_t kind,
			      const uint8_t *payload, size_t payload_len);

/* Why a peer of protocol version peer cannot talk to this one, with the
 * upgrade order (squashd first, then plugins and squashctl): for squashd
 * (self_is_squashd, peer: a client) or for a client (peer: squashd). */
void squash_frame_version_advice(char *buf, size_t len, unsigned peer, int self_is_squashd);

/* Receives one datagram into buf (which must hold SQUASH_FRAME_MAX bytes),
 * waiting at most timeout_ms (-1: forever). Stores its length in *len. */
int squash_frame_recv(int fd, uint8_t *buf, size_t *len, int timeout_ms);

const char *squash_frame_strerror(int err);

#endif
