/* The state file round-trips (daemon/registry/state_file.h): random
 * registries, built by random sequences of what squashd does to its
 * registry (kernel and FUSE mounts, unions, merges, lowers that die,
 * lingering, jobs, steps, sessions, overlays, releases, records of a newer
 * squashd, hostile strings), are saved, loaded back and compared field by
 * field with what the file keeps. A seeded generator: a failure names its
 * sequence and is reproduced by running the test again. No root needed. */
#include "config.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "registry/snapshot.h"
#include "registry/state_file.h"
#include "unit.h"

#define SEQUENCES 3000
#define MAX_OPS 40

static uint64_t rng_state;

static uint32_t rnd(uint32_t n)
{
	/* xorshift64*: deterministic for a seed. */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (uint32_t)((rng_state * 2685821657736338717ULL) >> 32) % n;
}

/* A string users or squashd could put in a field: paths, the empty
 * string, "-", spaces, escapes, newlines, non-ASCII and random bytes. */
static const char *rnd_string(char *buf, size_t cap, bool nonempty)
{
	static const char *const fixed[] = {
		"/images/a.sqfs", "-", "%", "%2D", "a b", "/home/u/caf\xc3\xa9.sqfs", "line\nbreak",
		"\x7f\x80\xff", "/squash/x", "--", "%00", "",
	};
	uint32_t k = rnd(16);

	if (k < sizeof(fixed) / sizeof(fixed[0])) {
		snprintf(buf, cap, "%s", fixed[k]);
	} else {
		size_t n = rnd((uint32_t)cap - 1);
		for (size_t i = 0; i < n; i++)
			buf[i] = (char)(1 + rnd(255));
		buf[n] = '\0';
	}
	if (nonempty && !*buf)
		snprintf(buf, cap, "/i");
	return buf;
}

static struct mount_key rnd_key(Squash__MountMode mode, uid_t owner)
{
	/* Small pools: equal keys happen. */
	return (struct mount_key){
		.dev = rnd(3) ? 2049 : (dev_t)UINT64_MAX, .ino = rnd(8), .size = rnd(2) ? 4096 : INT64_MAX,
		.mtime_sec = rnd(2) ? 1700000000 : -1, .mtime_nsec = rnd(1000000000), .mode = mode,
		.owner_uid = owner,
	};
}

static uid_t rnd_uid(void)
{
	static const uid_t uids[] = { 0, 1000, 1001, 65534, 4294967294u };
	return uids[rnd(5)];
}

static size_t count_mounts(const struct registry *r)
{
	size_t n = 0;
	for (const struct mount_entry *m = r->mounts; m; m = m->next)
		n++;
	return n;
}

static struct mount_entry *nth_mount(struct registry *r, size_t n)
{
	struct mount_entry *m = r->mounts;
	while (m && n--)
		m = m->next;
	return m;
}

static struct mount_entry *rnd_mount(struct registry *r, bool merged_ok)
{
	size_t n = count_mounts(r);
	struct mount_entry *m = n ? nth_mount(r, rnd((uint32_t)n)) : NULL;
	return m && (merged_ok || m->key.mode != MOUNT_MODE_MERGED) ? m : NULL;
}

static struct job_entry *rnd_entry(struct job_entry *list)
{
	size_t n = 0;
	for (struct job_entry *e = list; e; e = e->next)
		n++;
	if (!n)
		return NULL;
	for (uint32_t k = rnd((uint32_t)n); k--;)
		list = list->next;
	return list;
}

static bool referenced(const struct registry *r, const struct mount_entry *m)
{
	const struct job_entry *lists[] = { r->jobs, r->scoped };
	for (size_t l = 0; l < 2; l++)
		for (const struct job_entry *e = lists[l]; e; e = e->next)
			if (registry_job_uses(e, m))
				return true;
	for (const struct mount_entry *o = r->mounts; o; o = o->next)
		for (size_t i = 0; i < o->n_lowers; i++)
			if (o->lowers[i] == m)
				return true;
	return false;
}

static void append_extra(char **extra, unsigned tag)
{
	char line[64];
	size_t old = *extra ? strlen(*extra) : 0;
	int n = snprintf(line, sizeof(line), "note%u k=v %u\n", tag, rnd(100));
	char *grown = realloc(*extra, old + (size_t)n + 1);
	if (!grown)
		return;
	memcpy(grown + old, line, (size_t)n + 1);
	*extra = grown;
}

static const enum mount_state states[] = {
	MOUNT_READY, MOUNT_READY, MOUNT_READY, MOUNT_MOUNTING, MOUNT_FAILED, MOUNT_DEAD, MOUNT_UNMOUNTING,
};

static void op_mount(struct registry *r)
{
	char image[48];
	bool fuse = rnd(2);
	struct mount_key key = rnd_key(fuse ? SQUASH__MOUNT_MODE__FUSE : SQUASH__MOUNT_MODE__KERNEL,
				       fuse ? rnd_uid() : MOUNT_OWNER_ANY);
	struct mount_entry *m = registry_new_mount(r, &key, rnd_string(image, sizeof(image), true),
						   "/run/squashd/mnt");
	if (!m)
		return;
	m->state = states[rnd(7)];
	m->server_pid = fuse && rnd(2) ? (pid_t)(1 + rnd(99999)) : 0;
	if (!fuse)
		snprintf(m->loop_device, sizeof(m->loop_device), "/dev/loop%u", rnd(64));
	if (fuse && rnd(3) == 0) { /* a union of 1..4 images */
		struct mount_key parts[4];
		size_t n = 1 + rnd(4);
		for (size_t i = 0; i < n; i++)
			parts[i] = rnd_key(key.mode, key.owner_uid);
		registry_set_parts(m, parts, n);
	}
}

static void op_merge(struct registry *r)
{
	struct mount_entry *lowers[4];
	size_t n = 0;
	for (size_t want = 1 + rnd(4); n < want;) {
		struct mount_entry *l = rnd_mount(r, false);
		if (!l)
			return;
		lowers[n++] = l;
	}
	struct mount_key key = { .mode = MOUNT_MODE_MERGED, .owner_uid = MOUNT_OWNER_ANY };
	struct mount_entry *m = registry_new_mount(r, &key, "/images/top.sqfs (+1 merged)", "/run/squashd/mnt");
	if (m && registry_set_lowers(m, lowers, n) == 0)
		m->state = states[rnd(7)];
}

static void op_images(struct registry *r, struct job_entry *e)
{
	char image[48], target[48];
	for (size_t k = rnd(5); e && k--;) {
		struct mount_entry *m = rnd(4) ? rnd_mount(r, false) : NULL;
		if (registry_job_add_image(e, rnd_string(image, sizeof(image), false),
					   rnd_string(target, sizeof(target), false), m) < 0)
			return;
		struct mount_entry *merged = rnd_mount(r, true);
		if (merged && merged->key.mode == MOUNT_MODE_MERGED && rnd(2))
			e->images[e->count - 1].merged = merged;
	}
}

static void op_failure(struct job_entry *e)
{
	char message[48];
	if (e && rnd(4) == 0)
		registry_job_set_failure(e, (Squash__Status)(1 + rnd(8)), rnd_string(message, sizeof(message), false));
}

static void op_job(struct registry *r, uint32_t *next_job)
{
	struct job_entry *j = registry_add_job(r, (*next_job)++, rnd_uid());
	if (!j)
		return;
	j->pending = rnd(5) == 0;
	j->settling = j->pending && rnd(2);
	j->ends_with_extern = rnd(2);
	op_images(r, j);
	op_failure(j);
}

static void op_overlay(struct registry *r)
{
	char upper[48];
	struct job_entry *j = rnd_entry(r->jobs);
	if (!j || j->overlay_dir || j->count == 0)
		return;
	unsigned mask = rnd(1u << (j->count < 8 ? j->count : 8));
	if (registry_overlay_restore(j, rnd(4) ? "/run/squashd/mnt/j7" : "/run/x y/%j", mask) < 0)
		return;
	for (size_t i = 0; i < j->count; i++)
		if (j->images[i].overlay && rnd(2))
			j->images[i].upper = strdup(rnd_string(upper, sizeof(upper), true));
}

static void op_scope(struct registry *r, uint32_t *next_pid)
{
	bool session = rnd(2);
	struct job_entry *e = registry_add_scoped(r, session ? HOLDER_SESSION : HOLDER_STEP,
						  session ? 0 : rnd(4), session ? 0 : (*next_pid)++, rnd_uid());
	if (!e)
		return;
	e->session_pid = session ? (pid_t)(*next_pid)++ : 0;
	e->session_start = session ? ((unsigned long long)rnd(1u << 31) << 20) : 0;
	e->pending = rnd(5) == 0;
	e->settling = e->pending && rnd(2);
	op_images(r, e);
	op_failure(e);
}

static void op_linger(struct registry *r)
{
	struct mount_entry *m = rnd_mount(r, true);
	if (!m || referenced(r, m))
		return;
	if (m->state == MOUNT_READY) {
		m->state = MOUNT_LINGERING;
		m->linger_until_ms = squash_now_ms() + 1000LL * (1 + rnd(300));
	} else if (m->state == MOUNT_LINGERING) {
		m->state = MOUNT_READY; /* taken over */
		m->linger_until_ms = 0;
	}
}

static void op_release(struct registry *r)
{
	struct job_entry *e = rnd(2) ? rnd_entry(r->jobs) : rnd_entry(r->scoped);
	if (e && e->kind == HOLDER_JOB)
		registry_remove_job(r, e);
	else if (e)
		registry_remove_scoped(r, e);
	struct mount_entry *m = rnd_mount(r, true);
	if (m && !referenced(r, m) && rnd(2))
		registry_remove_mount(r, m);
}

static void op_extra(struct registry *r, unsigned tag)
{
	struct mount_entry *m = rnd_mount(r, true);
	struct job_entry *e = rnd(2) ? rnd_entry(r->jobs) : rnd_entry(r->scoped);
	switch (rnd(3)) {
	case 0: append_extra(&r->state_extra, tag); break;
	case 1: if (m) append_extra(&m->state_extra, tag); break;
	default: if (e) append_extra(&e->state_extra, tag); break;
	}
}

static void build(struct registry *r)
{
	uint32_t next_job = 1 + rnd(1000), next_pid = 2 + rnd(1000);
	for (size_t k = rnd(MAX_OPS); k--;) {
		switch (rnd(10)) {
		case 0: case 1: op_mount(r); break;
		case 2: op_merge(r); break;
		case 3: case 4: op_job(r, &next_job); break;
		case 5: op_scope(r, &next_pid); break;
		case 6: op_overlay(r); break;
		case 7: op_linger(r); break;
		case 8: op_release(r); break;
		default: op_extra(r, (unsigned)k); break;
		}
		struct mount_entry *m = rnd_mount(r, false);
		if (m && m->state == MOUNT_READY && rnd(8) == 0)
			m->state = MOUNT_DEAD; /* its FUSE server died */
	}
}

/* ---- Comparison: the loaded registry against what the file keeps. ---- */

static bool same_str(const char *a, const char *b)
{
	return !strcmp(a ? a : "", b ? b : "");
}

/* Where a field differs: the sequence and the field, once per sequence. */
static int seq_no;
static bool differs(bool same, const char *what)
{
	if (!same)
		fprintf(stderr, "sequence %d: %s differs after the round trip\n", seq_no, what);
	CHECK(same);
	return !same;
}

static unsigned kept_id(const struct mount_entry *m)
{
	return state_file_keeps_mount(m) && m->key.mode != MOUNT_MODE_MERGED ? m->id : 0;
}

static bool compare_mount(const struct mount_entry *a, const struct mount_entry *b)
{
	if (differs(b != NULL, "a kept mount"))
		return false;
	bool bad = differs(mount_key_equal(&a->key, &b->key), "mount key") ||
		   differs(!strcmp(a->image, b->image) && !strcmp(a->mount_point, b->mount_point), "mount paths") ||
		   differs(a->server_pid == b->server_pid && !strcmp(a->loop_device, b->loop_device), "mount server/loop") ||
		   differs(a->state == b->state, "mount state") ||
		   differs(same_str(a->state_extra, b->state_extra), "mount extra records") ||
		   differs(a->n_parts == b->n_parts, "union parts");
	for (size_t i = 0; !bad && i < a->n_parts; i++)
		bad = differs(mount_key_equal(&a->parts[i], &b->parts[i]), "union part");
	if (!bad && a->state == MOUNT_LINGERING)
		bad = differs(llabs(a->linger_until_ms - b->linger_until_ms) <= 2000, "linger expiry");
	size_t k = 0;
	for (size_t i = 0; !bad && i < a->n_lowers; i++) {
		if (!kept_id(a->lowers[i]))
			continue; /* a dead lower is left out */
		bad = differs(k < b->n_lowers && b->lowers[k] && b->lowers[k]->id == a->lowers[i]->id, "merged lower");
		k++;
	}
	return !bad && !differs(k == b->n_lowers, "merged lower count");
}

static bool compare_entry(const struct job_entry *a, const struct job_entry *b)
{
	if (differs(b != NULL, "a kept job/step/session"))
		return false;
	bool bad = differs(a->uid == b->uid && a->status == b->status, "entry uid/status") ||
		   differs(a->status == SQUASH__STATUS__OK || same_str(a->message, b->message), "entry message") ||
		   differs(a->ends_with_extern == b->ends_with_extern, "endwatch") ||
		   differs(a->session_pid == b->session_pid && a->session_start == b->session_start, "session") ||
		   differs(same_str(a->overlay_dir, b->overlay_dir), "overlay dir") ||
		   differs(same_str(a->state_extra, b->state_extra), "entry extra records") ||
		   differs(!b->pending && !b->settling, "pending") || differs(a->count == b->count, "image count");
	for (size_t i = 0; !bad && i < a->count; i++) {
		const struct job_image *x = &a->images[i], *y = &b->images[i];
		unsigned want = kept_id(x->mount);
		bad = differs(!strcmp(x->image, y->image) && !strcmp(x->target, y->target), "image paths") ||
		      differs(want ? y->mount && y->mount->id == want : !y->mount, "image mount") ||
		      differs(!y->merged, "merged link (relinked by adoption)") ||
		      differs(same_str(x->overlay, y->overlay) && y->writable == (x->overlay != NULL), "overlay") ||
		      differs(same_str(x->overlay ? x->upper : NULL, y->upper), "upper");
	}
	return !bad;
}

static const struct job_entry *find_scope(const struct registry *r, const struct job_entry *a)
{
	for (const struct job_entry *e = r->scoped; e; e = e->next)
		if (e->kind == a->kind && e->job_id == a->job_id && e->step_id == a->step_id &&
		    e->session_pid == a->session_pid)
			return e;
	return NULL;
}

static size_t count_list(const struct job_entry *e)
{
	size_t n = 0;
	for (; e; e = e->next)
		n++;
	return n;
}

/* Every entry the file keeps is back, equal, and nothing else is. */
static void compare(struct registry *a, struct registry *b)
{
	size_t kept = 0, kept_jobs = 0, kept_scopes = 0;

	if (differs(a->next_mount_id == b->next_mount_id, "next mount id"))
		fprintf(stderr, "%u vs %u\n", a->next_mount_id, b->next_mount_id);
	differs(same_str(a->state_extra, b->state_extra), "file extra records");
	for (struct mount_entry *m = a->mounts; m; m = m->next)
		if (state_file_keeps_mount(m) && ++kept && !compare_mount(m, registry_mount_by_id(b, m->id)))
			return;
	for (struct job_entry *j = a->jobs; j; j = j->next)
		if (state_file_keeps_entry(j) && ++kept_jobs && !compare_entry(j, registry_find_job(b, j->job_id)))
			return;
	for (struct job_entry *e = a->scoped; e; e = e->next)
		if (state_file_keeps_entry(e) && ++kept_scopes && !compare_entry(e, find_scope(b, e)))
			return;
	differs(count_mounts(b) == kept && count_list(b->jobs) == kept_jobs &&
		count_list(b->scoped) == kept_scopes, "entry count");
}

static size_t count_kept(const struct registry *r)
{
	size_t n = 0;
	for (const struct mount_entry *m = r->mounts; m; m = m->next)
		n += state_file_keeps_mount(m);
	for (const struct job_entry *j = r->jobs; j; j = j->next)
		n += state_file_keeps_entry(j);
	for (const struct job_entry *e = r->scoped; e; e = e->next)
		n += state_file_keeps_entry(e);
	return n;
}

/* One byte after the first line changed (a disk error, a hand edit): the
 * load still succeeds, dropping at most the entries of bad records
 * (state_file.h), never more entries than were kept. */
static void damage_one_byte(const char *path, char *text, size_t len, const struct registry *saved)
{
	char *first = memchr(text, '\n', len), err[1024];
	size_t head = first ? (size_t)(first - text) + 1 : len;
	struct registry loaded = { 0 };

	if (head >= len)
		return;
	size_t at = head + rnd((uint32_t)(len - head));
	text[at] = rnd(4) ? (char)(1 + rnd(255)) : '\n';
	FILE *f = fopen(path, "w");
	if (!f)
		return;
	fwrite(text, 1, len, f);
	fclose(f);
	int rc = state_file_load(&loaded, path, err, sizeof(err));
	differs(rc == 0 || rc == 1, "load of a damaged file (0 or 1)");
	size_t n = 0;
	for (const struct mount_entry *m = loaded.mounts; m; m = m->next)
		n++;
	n += count_list(loaded.jobs) + count_list(loaded.scoped);
	/* (A byte can turn one record into two entries at most.) */
	differs(n <= count_kept(saved) + 1, "entries after damage");
	registry_free(&loaded);
}

int main(void)
{
	char dir[] = "/tmp/test_state_file_round_trip.XXXXXX", path[256], err[1024];

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(path, sizeof(path), "%s/state", dir);
	for (seq_no = 0; seq_no < SEQUENCES; seq_no++) {
		struct registry saved = { 0 }, loaded = { 0 };
		char *text = NULL;
		size_t len = 0;

		rng_state = 0x9e3779b97f4a7c15ULL ^ (uint64_t)(seq_no + 1) * 0xbf58476d1ce4e5b9ULL;
		build(&saved);
		CHECK_INT(state_file_format(&saved, &text, &len), 0);
		/* squashd formats a snapshot (core/daemon.c): the same text. */
		struct registry *snap = registry_snapshot(&saved);
		char *snap_text = NULL;
		size_t snap_len = 0;
		CHECK(snap && state_file_format(snap, &snap_text, &snap_len) == 0);
		if (!strstr(text, "\nlinger ")) /* (expiry rounded at format time) */
			differs(snap_len == len && snap_text && !memcmp(text, snap_text, len), "snapshot's text");
		registry_snapshot_free(snap);
		if (seq_no % 2 && snap_text) {
			free(text);
			text = snap_text;
			len = snap_len;
		} else {
			free(snap_text);
		}
		FILE *f = fopen(path, "w");
		CHECK(f && fwrite(text, 1, len, f) == len);
		if (f)
			fclose(f);
		int rc = state_file_load(&loaded, path, err, sizeof(err));
		if (rc != 0)
			fprintf(stderr, "sequence %d: load: %s\n%s", seq_no, err, text);
		CHECK_INT(rc, 0);
		if (rc == 0)
			compare(&saved, &loaded);
		damage_one_byte(path, text, len, &saved);
		free(text);
		registry_free(&saved);
		registry_free(&loaded);
		if (unit_failures > 20)
			break;
	}
	unlink(path);
	rmdir(dir);
	return unit_exit_code();
}
