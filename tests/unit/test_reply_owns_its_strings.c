/* An answer owns what it says (daemon/requests/reply.c): squashd sends it
 * after the registry lock is let go, and by then the entry it describes
 * may be gone (a squash-shell session whose process exited while its
 * mount was made, a job its epilog released while a step asked about
 * it). Built from a session's entry that is then removed, the answer
 * still reads whole (ASan, in tests/sanitizers, sees any read of freed
 * memory). No root needed. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "registry/registry.h"
#include "requests/reply.h"
#include "squash.pb-c.h"
#include "unit.h"

int main(void)
{
	struct registry r = { 0 };
	struct mount_key key = { .dev = 1, .ino = 2, .mode = SQUASH__MOUNT_MODE__FUSE, .owner_uid = 1001 };
	struct mount_entry *m = registry_new_mount(&r, &key, "/home/a/img.sqfs", "/run/squashd/mnt");
	struct job_entry *e = registry_add_scoped(&r, HOLDER_SESSION, 0, 0, 1001);
	struct reply *out = malloc(sizeof(*out));

	m->state = MOUNT_READY;
	m->refcount = 1;
	e->session_pid = 4242;
	registry_job_add_image(e, "/home/a/img.sqfs", "/squash/img", m);
	reply_init(out);
	CHECK_INT(reply_add_mounts(out, e), 0);
	CHECK_INT(out->resp.n_job_mounts, 1);
	const Squash__JobMount *jm = out->resp.job_mounts[0];
	CHECK(jm->image != e->images[0].image && jm->target != e->images[0].target &&
	      jm->source != m->mount_point);

	/* The session's process exited: its entry and its mount go. */
	char *point = strdup(m->mount_point);
	registry_remove_scoped(&r, e);
	registry_remove_mount(&r, m);
	size_t len = squash__response__get_packed_size(&out->resp);
	uint8_t *buf = malloc(len);
	CHECK_INT(squash__response__pack(&out->resp, buf), len);
	Squash__Response *back = squash__response__unpack(NULL, len, buf);
	CHECK(back != NULL && back->n_job_mounts == 1);
	CHECK_STR(back->job_mounts[0]->image, "/home/a/img.sqfs");
	CHECK_STR(back->job_mounts[0]->target, "/squash/img");
	CHECK_STR(back->job_mounts[0]->source, point);
	squash__response__free_unpacked(back, NULL);
	free(buf);
	free(point);
	reply_free(out);
	free(out);
	return unit_exit_code();
}
