/* The known records of the state file (state_file_records.h). */
#include "config.h"
#include "registry/state_file_records.h"

#include "clock.h"
#include "registry/linger.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Decodes in place; returns NULL on a malformed escape. */
static char *decode_field(char *s)
{
	if (!strcmp(s, "-")) {
		s[0] = '\0';
		return s;
	}
	char *out = s;
	for (char *p = s; *p; p++) {
		if (*p == '%') {
			int hi = hexval(p[1]), lo = hi < 0 ? -1 : hexval(p[2]);
			if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
				return NULL;
			*out++ = (char)(hi * 16 + lo);
			p += 2;
		} else {
			*out++ = *p;
		}
	}
	*out = '\0';
	return s;
}

int parse_mount(struct registry *r, char **fv, int n)
{
	if (n < 13)
		return -1;
	struct mount_key key = {0};
	unsigned id;
	int mode, pid;
	uintmax_t dev, ino;
	intmax_t size, owner;
	long nsec;
	int64_t sec;
	if (sscanf(fv[1], "%u", &id) != 1 || sscanf(fv[2], "%d", &mode) != 1 ||
	    sscanf(fv[3], "%ju", &dev) != 1 || sscanf(fv[4], "%ju", &ino) != 1 ||
	    sscanf(fv[5], "%jd", &size) != 1 || sscanf(fv[6], "%" SCNd64, &sec) != 1 ||
	    sscanf(fv[7], "%ld", &nsec) != 1 || sscanf(fv[8], "%jd", &owner) != 1 ||
	    sscanf(fv[9], "%d", &pid) != 1)
		return -1;
	char *loop = decode_field(fv[10]), *mp = decode_field(fv[11]), *image = decode_field(fv[12]);
	if (!loop || !mp || !image || !*mp || !*image || strlen(loop) >= sizeof(((struct mount_entry *)0)->loop_device))
		return -1;
	if (mode != SQUASH__MOUNT_MODE__FUSE && mode != SQUASH__MOUNT_MODE__KERNEL)
		return -1;
	key.dev = (dev_t)dev;
	key.ino = (ino_t)ino;
	key.size = (off_t)size;
	key.mtime_sec = sec;
	key.mtime_nsec = nsec;
	key.mode = (Squash__MountMode)mode;
	key.owner_uid = owner < 0 ? MOUNT_OWNER_ANY : (uid_t)owner;
	unsigned next = r->next_mount_id; /* (the file's id, not a new one) */
	struct mount_entry *m = registry_add_mount(r, &key, image, mp);
	r->next_mount_id = next;
	if (!m)
		return -1;
	m->id = id;
	m->server_pid = pid > 0 ? pid : 0;
	snprintf(m->loop_device, sizeof(m->loop_device), "%s", loop);
	return 0;
}

/* "linger MOUNTID EXPIRY": the mount before it lingers until EXPIRY
 * (seconds since the epoch). */
/* "merged ID MOUNTPOINT IMAGE LOWERID,...": a merged mount of the mounts
 * read before it ("-": none left). */
int parse_merged(struct registry *r, char **fv, int n)
{
	unsigned id;
	if (n != 5 || sscanf(fv[1], "%u", &id) != 1 || id == 0 || registry_mount_by_id(r, id))
		return -1;
	char *mp = decode_field(fv[2]), *image = decode_field(fv[3]);
	if (!mp || !image || !*mp || !*image)
		return -1;
	size_t count = 0, cap = 1;
	for (const char *p = fv[4]; *p; p++)
		cap += *p == ',';
	if (cap > SQUASH_MAX_IMAGES)
		return -1;
	struct mount_entry **lowers = malloc(cap * sizeof(*lowers));
	if (!lowers)
		return -1;
	for (char *save = NULL, *tok = strcmp(fv[4], "-") ? strtok_r(fv[4], ",", &save) : NULL; tok;
	     tok = strtok_r(NULL, ",", &save)) {
		unsigned lid;
		char extra;
		struct mount_entry *l = sscanf(tok, "%u%c", &lid, &extra) == 1 ? registry_mount_by_id(r, lid) : NULL;
		if (!l || l->key.mode == MOUNT_MODE_MERGED || count == cap) {
			free(lowers);
			return -1;
		}
		lowers[count++] = l;
	}
	struct mount_key key = { .mode = MOUNT_MODE_MERGED, .owner_uid = MOUNT_OWNER_ANY };
	unsigned next = r->next_mount_id;
	struct mount_entry *m = registry_add_mount(r, &key, image, mp);
	r->next_mount_id = next;
	int rc = m ? registry_set_lowers(m, lowers, count) : -1;
	free(lowers);
	if (m)
		m->id = id;
	return rc;
}

/* "part ID DEV INO SIZE SEC NSEC": the next image of union mount ID, read
 * just before (its images follow its mount record, bottom first). */
int parse_part(struct registry *r, char **fv, int n)
{
	unsigned id;
	uintmax_t dev, ino;
	intmax_t size;
	int64_t sec;
	long nsec;
	struct mount_entry *m = r->mounts;

	if (n < 7 || sscanf(fv[1], "%u", &id) != 1 || sscanf(fv[2], "%ju", &dev) != 1 ||
	    sscanf(fv[3], "%ju", &ino) != 1 || sscanf(fv[4], "%jd", &size) != 1 ||
	    sscanf(fv[5], "%" SCNd64, &sec) != 1 || sscanf(fv[6], "%ld", &nsec) != 1)
		return -1;
	/* Only the mount just read, a FUSE one, and no more images than a
	 * union may have. */
	if (!m || m->id != id || m->key.mode != SQUASH__MOUNT_MODE__FUSE ||
	    m->key.owner_uid == MOUNT_OWNER_ANY || m->n_parts >= SQUASH_MAX_IMAGES)
		return -1;
	struct mount_key *grown = realloc(m->parts, (m->n_parts + 1) * sizeof(*grown));
	if (!grown)
		return -1;
	grown[m->n_parts++] = (struct mount_key){
		.dev = (dev_t)dev, .ino = (ino_t)ino, .size = (off_t)size, .mtime_sec = sec,
		.mtime_nsec = nsec, .mode = m->key.mode, .owner_uid = m->key.owner_uid,
	};
	m->parts = grown;
	return 0;
}

int parse_linger(struct registry *r, char **fv, int n)
{
	unsigned id;
	intmax_t expiry;
	if (n < 3 || sscanf(fv[1], "%u", &id) != 1 || sscanf(fv[2], "%jd", &expiry) != 1)
		return -1;
	struct mount_entry *m = registry_mount_by_id(r, id);
	if (!m || m->state != MOUNT_READY)
		return -1;
	linger_restore(m, (time_t)expiry, squash_now_ms(), time(NULL));
	return 0;
}

/* "overlay JOBID DIR MASK": the job's overlays (after its images). */
int parse_overlay(struct registry *r, char **fv, int n)
{
	unsigned job_id, mask;
	if (n < 4 || sscanf(fv[1], "%u", &job_id) != 1 || sscanf(fv[3], "%x", &mask) != 1)
		return -1;
	struct job_entry *j = registry_find_job(r, job_id);
	char *dir = decode_field(fv[2]);
	if (!j || !dir)
		return -1;
	return registry_overlay_restore(j, dir, mask);
}

/* "upper JOBID INDEX DIR": that overlay keeps its changes in DIR. */
int parse_upper(struct registry *r, char **fv, int n)
{
	unsigned job_id, index;
	if (n < 4 || sscanf(fv[1], "%u", &job_id) != 1 || sscanf(fv[2], "%u", &index) != 1)
		return -1;
	struct job_entry *j = registry_find_job(r, job_id);
	char *dir = decode_field(fv[3]);
	if (!j || !dir || !*dir || index >= j->count || !j->images[index].overlay ||
	    j->images[index].upper)
		return -1;
	return (j->images[index].upper = strdup(dir)) ? 0 : -1;
}

/* "endwatch JOBID": the job is released when its extern step ends. */
int parse_endwatch(struct registry *r, char **fv, int n)
{
	unsigned job_id;
	if (n < 2 || sscanf(fv[1], "%u", &job_id) != 1)
		return -1;
	struct job_entry *j = registry_find_job(r, job_id);
	if (!j)
		return -1;
	j->ends_with_extern = true;
	return 0;
}

int parse_job(struct registry *r, char **fv, int n)
{
	unsigned job_id, uid;
	int status;
	if (n < 5 || sscanf(fv[1], "%u", &job_id) != 1 || sscanf(fv[2], "%u", &uid) != 1 ||
	    sscanf(fv[3], "%d", &status) != 1 || registry_find_job(r, job_id))
		return -1;
	char *message = decode_field(fv[4]);
	struct job_entry *j = message ? registry_add_job(r, job_id, uid) : NULL;
	if (!j)
		return -1;
	if (status != SQUASH__STATUS__OK && registry_job_set_failure(j, (Squash__Status)status, message) < 0)
		return -1;
	return 0;
}

int parse_image(struct registry *r, char **fv, int n)
{
	unsigned job_id, mount_id;
	if (n < 5 || sscanf(fv[1], "%u", &job_id) != 1 || sscanf(fv[2], "%u", &mount_id) != 1)
		return -1;
	struct job_entry *j = registry_find_job(r, job_id);
	struct mount_entry *m = mount_id ? registry_mount_by_id(r, mount_id) : NULL;
	char *image = decode_field(fv[3]), *target = decode_field(fv[4]);
	if (!j || !image || !target || registry_job_add_image(j, image, target, m) < 0)
		return -1;
	/* A mount the file named but that was dropped: the job lost it, as
	 * when a mount vanishes while squashd is down (core/adopt.c). */
	if (mount_id && !m)
		return registry_job_set_failure(j, SQUASH__STATUS__NODE_ERROR,
						"a mount of this job could not be read back from squashd's registry");
	return 0;
}

int parse_scope(struct registry *r, char **fv, int n)
{
	unsigned job_id, step_id, uid;
	int kind, pid, status;
	unsigned long long start;
	if (n < 9 || sscanf(fv[1], "%d", &kind) != 1 || sscanf(fv[2], "%u", &job_id) != 1 ||
	    sscanf(fv[3], "%u", &step_id) != 1 || sscanf(fv[4], "%d", &pid) != 1 ||
	    sscanf(fv[5], "%llu", &start) != 1 || sscanf(fv[6], "%u", &uid) != 1 ||
	    sscanf(fv[7], "%d", &status) != 1)
		return -1;
	if ((kind != HOLDER_STEP && kind != HOLDER_SESSION) || (kind == HOLDER_SESSION && pid <= 0))
		return -1;
	char *message = decode_field(fv[8]);
	struct job_entry *e = message ? registry_add_scoped(r, (enum holder_kind)kind, job_id, step_id, uid) : NULL;
	if (!e)
		return -1;
	e->session_pid = pid;
	e->session_start = start;
	if (status != SQUASH__STATUS__OK && registry_job_set_failure(e, (Squash__Status)status, message) < 0)
		return -1;
	return 0;
}

/* An image of the scope read last (registry_add_scoped puts it first). */
int parse_scoped_image(struct registry *r, char **fv, int n)
{
	unsigned mount_id;
	if (n < 4 || !r->scoped || sscanf(fv[1], "%u", &mount_id) != 1)
		return -1;
	struct mount_entry *m = mount_id ? registry_mount_by_id(r, mount_id) : NULL;
	char *image = decode_field(fv[2]), *target = decode_field(fv[3]);
	if (!image || !target)
		return -1; /* (a dropped mount: lost, as in parse_image) */
	return registry_job_add_image(r->scoped, image, target, m);
}

