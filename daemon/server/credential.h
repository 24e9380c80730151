/* MUNGE credentials on requests: the credential's payload must be exactly
 * the request bytes and its uid the connecting process's uid. munged's
 * replay cache and TTL refuse a credential used twice or too late. */
#ifndef SQUASHD_CREDENTIAL_H
#define SQUASHD_CREDENTIAL_H

#include <stdbool.h>
#include <stddef.h>

#include "util/peer.h"
#include "squash.pb-c.h"

/* Returns 0 when the signed request may be trusted as coming from peer, -1
 * with the reason in err. When MUNGE is not required, a request without a
 * credential passes and one with a credential is still verified. */
int credential_verify(const Squash__SignedRequest *signed_request,
		      const struct peer *peer, bool required,
		      const char *munge_socket, char *err, size_t errlen);

#endif
