#include "config.h"
#include "server/credential.h"

#include <munge.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sha256.h"

/* A credential carries a 32-byte digest: a few hundred bytes of base64. */
#define CREDENTIAL_MAX 4096

int credential_verify(const Squash__SignedRequest *signed_request,
		      const struct peer *peer, bool required,
		      const char *munge_socket, char *err, size_t errlen)
{
	if (!signed_request->has_munge_credential) {
		if (!required)
			return 0;
		snprintf(err, errlen,
			 "request carries no MUNGE credential, which this node requires "
			 "(require_munge = yes): is munged running on this node? A cluster "
			 "without MUNGE (AuthType=auth/slurm) sets require_munge = no in squashd.conf");
		return -1;
	}
	const ProtobufCBinaryData *cred = &signed_request->munge_credential;
	if (cred->len == 0 || cred->len > CREDENTIAL_MAX) {
		snprintf(err, errlen, "MUNGE credential has an invalid length (%zu)", cred->len);
		return -1;
	}
	/* munge_decode wants a NUL-terminated string. */
	char *text = malloc(cred->len + 1);
	if (!text) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	memcpy(text, cred->data, cred->len);
	text[cred->len] = '\0';

	munge_ctx_t ctx = munge_ctx_create();
	if (!ctx) {
		free(text);
		snprintf(err, errlen, "cannot create MUNGE context");
		return -1;
	}
	if (munge_socket && *munge_socket)
		munge_ctx_set(ctx, MUNGE_OPT_SOCKET, munge_socket);

	void *payload = NULL;
	int payload_len = 0;
	uid_t uid;
	gid_t gid;
	munge_err_t merr = munge_decode(text, ctx, &payload, &payload_len, &uid, &gid);
	int rc = -1;
	if (merr != EMUNGE_SUCCESS) {
		snprintf(err, errlen, "MUNGE credential refused: %s", munge_ctx_strerror(ctx));
	} else if (uid != peer->uid) {
		snprintf(err, errlen, "MUNGE credential is for uid %u but the peer is uid %u",
			 (unsigned)uid, (unsigned)peer->uid);
	} else {
		uint8_t digest[SQUASH_SHA256_SIZE];

		squash_sha256(signed_request->request.data, signed_request->request.len, digest);
		if (payload_len != SQUASH_SHA256_SIZE || memcmp(payload, digest, sizeof(digest)))
			snprintf(err, errlen, "MUNGE credential does not match the request it came with");
		else
			rc = 0;
	}
	free(payload);
	free(text);
	munge_ctx_destroy(ctx);
	return rc;
}
