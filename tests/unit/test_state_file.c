/* squashd's registry on disk (daemon/registry/state_file.h): what a
 * restarted squashd reads back is what was saved; a truncated file or a
 * hostile record gives an empty registry and a reason, never a crash or
 * half a registry; a file a newer squashd of the same format wrote (record
 * kinds and fields this one does not know) loses no mount, and its unknown
 * records go back to disk with their entry; a file of another format is
 * refused as such, and squashd (core/daemon.c) keeps an unreadable file
 * aside and refuses new mounts instead of starting empty. No root
 * needed. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <glob.h>

#include "core_fixture.h"
#include "registry/linger.h"
#include "registry/state_file.h"
#include "unit.h"

static char dir[] = "/tmp/test_state_file.XXXXXX";
static char path[256];

static void write_text(const char *text)
{
	FILE *f = fopen(path, "w");
	fputs(text, f);
	fclose(f);
}

static char *read_text(size_t *len)
{
	FILE *f = fopen(path, "r");
	char *buf = calloc(1, 1 << 16);
	*len = fread(buf, 1, (1 << 16) - 1, f);
	fclose(f);
	return buf;
}

static int by_text(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* text's lines sorted, without "next" and "linger" records; a job's or
 * scope's image records stay behind it (the line before is prefixed). */
static void sort_records(char *text)
{
	char *lines[256], *copy = strdup(text), *save = NULL, group[4096] = "";
	size_t n = 0, used = 0;

	for (char *l = strtok_r(copy, "\n", &save); l && n < 256; l = strtok_r(NULL, "\n", &save)) {
		if (!strncmp(l, "next ", 5) || !strncmp(l, "linger ", 7))
			continue;
		if (!strncmp(l, "job ", 4) || !strncmp(l, "scope ", 6) || !strncmp(l, "mount ", 6))
			snprintf(group, sizeof(group), "%s", l);
		if (asprintf(&lines[n], "%s|%s", group, l) > 0)
			n++;
	}
	qsort(lines, n, sizeof(lines[0]), by_text);
	text[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		used += (size_t)sprintf(text + used, "%s\n", lines[i]);
		free(lines[i]);
	}
	free(copy);
}

/* A registry with one of everything the file records. */
static void fill(struct registry *r)
{
	struct mount_key kernel = { .dev = 2049, .ino = 77, .size = 1 << 20, .mtime_sec = 1700000000,
				    .mtime_nsec = 5, .mode = SQUASH__MOUNT_MODE__KERNEL,
				    .owner_uid = MOUNT_OWNER_ANY };
	struct mount_key fuse = kernel;
	fuse.ino = 78;
	fuse.mode = SQUASH__MOUNT_MODE__FUSE;
	fuse.owner_uid = 1000;

	struct mount_entry *k = registry_new_mount(r, &kernel, "/images/with space,comma%.sqfs", "/run/squashd/mnt");
	struct mount_entry *f = registry_new_mount(r, &fuse, "/home/u/env.sqfs", "/run/squashd/mnt");
	struct mount_entry *lingering = registry_new_mount(r, &kernel, "/images/old.sqfs", "/run/squashd/mnt");
	struct mount_entry *mounting = registry_new_mount(r, &fuse, "/half.sqfs", "/run/squashd/mnt");
	k->state = f->state = lingering->state = MOUNT_READY;
	snprintf(k->loop_device, sizeof(k->loop_device), "/dev/loop3");
	f->server_pid = 4321;
	linger_begin(lingering, 120, 0);
	(void)mounting; /* half-made: never saved */

	struct job_entry *job = registry_add_job(r, 100, 1000);
	registry_job_add_image(job, k->image, "/squash/a", k);
	registry_job_add_image(job, f->image, "/squash/b", f);
	registry_overlay_restore(job, "/run/squashd/mnt/j9", 0x2);
	job->images[1].upper = strdup("/home/u/changes");
	struct job_entry *failed = registry_add_job(r, 101, 1001);
	registry_job_set_failure(failed, SQUASH__STATUS__USER_ERROR, "image /x: no such file\nsecond line");
	failed->ends_with_extern = true; /* mounted by its first step */
	struct job_entry *pending = registry_add_job(r, 102, 1000);
	pending->pending = true; /* its prolog retries: never saved */

	struct job_entry *step = registry_add_scoped(r, HOLDER_STEP, 100, 4, 1000);
	step->session_pid = 555;
	step->session_start = 123456;
	registry_job_add_image(step, f->image, "/squash/step", f);
	struct job_entry *session = registry_add_scoped(r, HOLDER_SESSION, 0, 0, 1000);
	session->session_pid = 777;
	session->session_start = 654321;
	registry_job_add_image(session, k->image, "/squash/s", k);
}

static void what_was_saved_is_read_back(void)
{
	struct registry saved = { 0 }, loaded = { 0 };
	char err[512];

	fill(&saved);
	CHECK_INT(state_file_save(&saved, path, err, sizeof(err)), 0);
	CHECK_INT(state_file_load(&loaded, path, err, sizeof(err)), 0);

	size_t mounts = 0;
	for (struct mount_entry *m = loaded.mounts; m; m = m->next)
		mounts++;
	CHECK_INT(mounts, 3); /* not the one still mounting */
	struct mount_entry *k = registry_mount_by_id(&loaded, 1), *f = registry_mount_by_id(&loaded, 2);
	struct mount_entry *l = registry_mount_by_id(&loaded, 3);
	CHECK(k && f && l);
	if (!k || !f || !l)
		return;
	CHECK_STR(k->image, "/images/with space,comma%.sqfs");
	CHECK_STR(k->mount_point, "/run/squashd/mnt/m1");
	CHECK_STR(k->loop_device, "/dev/loop3");
	CHECK_INT(k->key.owner_uid, MOUNT_OWNER_ANY);
	CHECK_INT(k->key.mtime_nsec, 5);
	CHECK_INT(f->key.owner_uid, 1000);
	CHECK_INT(f->key.mode, SQUASH__MOUNT_MODE__FUSE);
	CHECK_INT(f->server_pid, 4321);
	CHECK_INT(l->state, MOUNT_LINGERING);
	CHECK(loaded.next_mount_id >= 4); /* ids stay unique after adoption */

	struct job_entry *job = registry_find_job(&loaded, 100);
	CHECK(job && job->count == 2);
	if (job && job->count == 2) {
		CHECK(job->images[0].mount == k && job->images[1].mount == f);
		CHECK_STR(job->images[0].target, "/squash/a");
		CHECK_STR(job->images[1].overlay, "/run/squashd/mnt/j9/o1");
		CHECK_STR(job->images[1].upper, "/home/u/changes");
		CHECK_STR(job->overlay_dir, "/run/squashd/mnt/j9");
	}
	struct job_entry *failed = registry_find_job(&loaded, 101);
	CHECK(failed && failed->status == SQUASH__STATUS__USER_ERROR && failed->ends_with_extern);
	CHECK(job && !job->ends_with_extern);
	if (failed)
		CHECK_STR(failed->message, "image /x: no such file\nsecond line");
	CHECK(registry_find_job(&loaded, 102) == NULL);

	struct job_entry *step = registry_find_step(&loaded, 100, 4);
	CHECK(step && step->session_pid == 555 && step->session_start == 123456 && step->count == 1);
	if (step && step->count == 1)
		CHECK(step->images[0].mount == f);
	struct job_entry *session = registry_find_session(&loaded, 777);
	CHECK(session && session->session_start == 654321 && session->count == 1);

	/* Saving what was read gives the same records (in another order, and
	 * but for the linger's expiry, a wall-clock second that may tick
	 * meanwhile, and the next mount id, which only has to stay unique). */
	size_t len1, len2;
	char *first = read_text(&len1);
	CHECK_INT(state_file_save(&loaded, path, err, sizeof(err)), 0);
	char *second = read_text(&len2);
	sort_records(first);
	sort_records(second);
	CHECK_STR(second, first);
	free(first);
	free(second);
	registry_free(&saved);
	registry_free(&loaded);
}

static int load_text(const char *text, char *err, size_t errlen);
/* Entries (mounts, jobs, scopes) the last load_text kept. */
static size_t loaded_entries;

/* A merged mount (several images at one target) is recorded after the
 * mounts it stacks, with their ids, bottom first; who merges it is not
 * recorded (core/merge.c links a holder's images at one target again). */
static void merged_mounts_are_read_back(void)
{
	struct registry saved = { 0 }, loaded = { 0 };
	struct mount_key key = { .dev = 2049, .ino = 10, .mode = SQUASH__MOUNT_MODE__KERNEL,
				 .owner_uid = MOUNT_OWNER_ANY };
	struct mount_key merged_key = { .mode = MOUNT_MODE_MERGED, .owner_uid = MOUNT_OWNER_ANY };
	char err[512];

	struct mount_entry *a = registry_new_mount(&saved, &key, "/d/b0.sqfs", "/run/squashd/mnt");
	key.ino = 11;
	struct mount_entry *b = registry_new_mount(&saved, &key, "/d/b1.sqfs", "/run/squashd/mnt");
	struct mount_entry *m = registry_new_mount(&saved, &merged_key, "/d/b1.sqfs (+1 merged)",
						   "/run/squashd/mnt");
	struct mount_entry *lowers[] = { a, b };
	CHECK_INT(registry_set_lowers(m, lowers, 2), 0);
	a->state = b->state = m->state = MOUNT_READY;
	struct job_entry *job = registry_add_job(&saved, 7, 1000);
	registry_job_add_image(job, a->image, "/squash/data", a);
	registry_job_add_image(job, b->image, "/squash/data", b);
	CHECK_INT(state_file_save(&saved, path, err, sizeof(err)), 0);
	size_t text_len;
	char *text = read_text(&text_len);
	CHECK_CONTAINS(text, "merged 3 /run/squashd/mnt/m3 /d/b1.sqfs%20(+1%20merged) 1,2\n");
	free(text);

	CHECK_INT(state_file_load(&loaded, path, err, sizeof(err)), 0);
	struct mount_entry *la = registry_mount_by_id(&loaded, 1), *lb = registry_mount_by_id(&loaded, 2);
	struct mount_entry *lm = registry_mount_by_id(&loaded, 3);
	CHECK(la && lb && lm);
	if (la && lb && lm) {
		struct mount_entry *want[] = { la, lb }, *other[] = { lb, la };
		CHECK_INT(lm->key.mode, MOUNT_MODE_MERGED);
		CHECK_INT(lm->n_lowers, 2);
		CHECK(registry_find_merged(&loaded, want, 2) == lm);
		CHECK(registry_find_merged(&loaded, other, 2) == NULL); /* order matters */
		CHECK(registry_find_mount(&loaded, &la->key) == la);
	}
	registry_free(&saved);
	registry_free(&loaded);

	/* A merged record naming a mount not read before it is dropped. */
	static const char *const bad[] = {
		"squashd-state 1\nmerged 3 /m/m3 /x 9\n",
		"squashd-state 1\nmerged 3 /m/m3 /x 1x\n",
		"squashd-state 1\nmerged 0 /m/m3 /x -\n",
		"squashd-state 1\nmerged 3 /m/m3 /x 3\n", /* itself */
		NULL,
	};
	for (size_t i = 0; bad[i]; i++) {
		CHECK_INT(load_text(bad[i], err, sizeof(err)), 1);
		CHECK_INT(loaded_entries, 0);
	}
}

/* A union mount (core/union_mount.h) is recorded with its images' keys,
 * bottom first, in "part" records after its mount record; read back, it
 * is found by the same list of the same user only. */
static void union_mounts_are_read_back(void)
{
	struct registry saved = { 0 }, loaded = { 0 };
	struct mount_key key = { .mode = SQUASH__MOUNT_MODE__FUSE, .owner_uid = 1000 };
	struct mount_key parts[3];
	char err[512];

	for (size_t i = 0; i < 3; i++)
		parts[i] = (struct mount_key){ .dev = 2049, .ino = 20 + i, .size = 4096, .mtime_sec = 1700000000,
					       .mtime_nsec = 5, .mode = SQUASH__MOUNT_MODE__FUSE, .owner_uid = 1000 };
	struct mount_entry *u = registry_new_mount(&saved, &key, "/d/b2.sqfs (+2 in a union)", "/run/squashd/mnt");
	CHECK_INT(registry_set_parts(u, parts, 3), 0);
	u->state = MOUNT_READY;
	u->server_pid = 4242;
	struct job_entry *job = registry_add_job(&saved, 7, 1000);
	for (size_t i = 0; i < 3; i++)
		registry_job_add_image(job, "/d/b.sqfs", "/squash/data", u);
	CHECK(registry_find_union(&saved, 1000, parts, 3) == u);
	CHECK(registry_find_mount(&saved, &key) == NULL); /* no image's own mount */
	CHECK_INT(state_file_save(&saved, path, err, sizeof(err)), 0);
	size_t text_len;
	char *text = read_text(&text_len);
	CHECK_CONTAINS(text, "part 1 2049 20 4096 1700000000 5\npart 1 2049 21 4096 1700000000 5\n"
			     "part 1 2049 22 4096 1700000000 5\n");
	free(text);

	CHECK_INT(state_file_load(&loaded, path, err, sizeof(err)), 0);
	struct mount_entry *lu = registry_mount_by_id(&loaded, 1);
	struct mount_key swapped[3] = { parts[1], parts[0], parts[2] };
	CHECK(lu && lu->n_parts == 3 && lu->server_pid == 4242);
	CHECK(registry_find_union(&loaded, 1000, parts, 3) == lu);
	CHECK(registry_find_union(&loaded, 1001, parts, 3) == NULL);   /* another user's */
	CHECK(registry_find_union(&loaded, 1000, swapped, 3) == NULL); /* order matters */
	CHECK(registry_find_union(&loaded, 1000, parts, 2) == NULL);
	CHECK(registry_find_job(&loaded, 7) && registry_find_job(&loaded, 7)->images[2].mount == lu);
	registry_free(&saved);
	registry_free(&loaded);

	/* A part only right after its own FUSE mount of a user. */
	static const char *const bad[] = {
		"squashd-state 1\npart 1 2049 20 4096 1700000000 5\n",
		"squashd-state 1\nmount 1 1 2049 10 4096 0 0 -1 0 - /m/m1 /x\npart 1 2049 20 4096 1 5\n",
		"squashd-state 1\nmount 1 1 0 0 0 0 0 1000 0 - /m/m1 /x\npart 2 2049 20 4096 1 5\n",
		"squashd-state 1\nmount 1 1 0 0 0 0 0 1000 0 - /m/m1 /x\npart 1 2049 x 4096 1 5\n",
		NULL,
	};
	for (size_t i = 0; bad[i]; i++) {
		CHECK_INT(load_text(bad[i], err, sizeof(err)), 1);
		CHECK_INT(loaded_entries, 0);
	}
}

static void a_missing_file_is_an_empty_registry(void)
{
	struct registry r = { 0 };
	char err[512];

	unlink(path);
	CHECK_INT(state_file_load(&r, path, err, sizeof(err)), 0);
	CHECK(r.mounts == NULL && r.jobs == NULL && r.scoped == NULL);
}

/* Loading text succeeds, drops the entries of bad records (1) with a
 * reason naming the line, or fails (-1, -2) leaving the registry empty. */
static int load_text(const char *text, char *err, size_t errlen)
{
	struct registry r = { 0 };

	write_text(text);
	err[0] = '\0';
	int rc = state_file_load(&r, path, err, errlen);
	if (rc < 0)
		CHECK(r.mounts == NULL && r.jobs == NULL && r.scoped == NULL && r.state_extra == NULL);
	loaded_entries = 0;
	for (struct mount_entry *m = r.mounts; m; m = m->next)
		loaded_entries++;
	for (struct job_entry *j = r.jobs; j; j = j->next)
		loaded_entries++;
	for (struct job_entry *e = r.scoped; e; e = e->next)
		loaded_entries++;
	registry_free(&r);
	return rc;
}

/* What a newer squashd of format 1 might write: a header revision, record
 * kinds this one does not know (of the file, of a mount, of a job, of a
 * scope) and fields at the end of known records. */
static const char newer_file[] =
	"squashd-state 1.4 written-by=slurm-squash-9.9\n"
	"next 7\n"
	"nodeinfo epoch=3 cgroup=v2\n"
	"mount 1 2 2049 77 1048576 1700000000 5 -1 0 /dev/loop3 /run/squashd/mnt/m1 /images/a.sqfs erofs=0 verity=abc\n"
	"mountstat 1 reads=12\n"
	"mount 2 1 2049 78 1048576 1700000000 5 1000 4321 - /run/squashd/mnt/m2 /home/u/env.sqfs pool=7\n"
	"job 100 1000 0 - array=5_3\n"
	"jobnote 100 priority=high\n"
	"image 100 1 /images/a.sqfs /squash/a ro\n"
	"endwatch 100 cgroup=/sys/fs/cgroup/x\n"
	"image 100 2 /home/u/env.sqfs /squash/b\n"
	"jobnote 100 second\n"
	"job 101 1001 0 -\n"
	"image 101 2 /home/u/env.sqfs /squash/c\n"
	"scope 1 100 4 555 123456 1000 0 - extra\n"
	"scopenote 4\n"
	"simage 2 /home/u/env.sqfs /squash/step\n";

static size_t count_mounts(const struct registry *r)
{
	size_t n = 0;
	for (const struct mount_entry *m = r->mounts; m; m = m->next)
		n++;
	return n;
}

static void a_newer_file_of_the_same_format_forgets_no_mount(void)
{
	struct registry r = { 0 }, again = { 0 };
	char err[512] = "";

	write_text(newer_file);
	CHECK_INT(state_file_load(&r, path, err, sizeof(err)), 0);
	CHECK_STR(err, "");
	CHECK_INT(count_mounts(&r), 2);
	struct mount_entry *k = registry_mount_by_id(&r, 1), *f = registry_mount_by_id(&r, 2);
	CHECK(k && f);
	if (!k || !f)
		return;
	CHECK_STR(k->image, "/images/a.sqfs");
	CHECK_STR(k->loop_device, "/dev/loop3");
	CHECK_INT(f->server_pid, 4321);
	struct job_entry *job = registry_find_job(&r, 100), *other = registry_find_job(&r, 101);
	CHECK(job && job->count == 2 && job->ends_with_extern);
	if (job && job->count == 2)
		CHECK(job->images[0].mount == k && job->images[1].mount == f);
	CHECK(other && other->count == 1 && other->images[0].mount == f);
	struct job_entry *step = registry_find_step(&r, 100, 4);
	CHECK(step && step->count == 1 && step->session_pid == 555);
	CHECK(r.next_mount_id >= 7);

	/* Unknown records stay with their entry. */
	CHECK_STR(r.state_extra, "nodeinfo epoch=3 cgroup=v2\n");
	CHECK_STR(k->state_extra, "mountstat 1 reads=12\n");
	CHECK(f->state_extra == NULL);
	if (job)
		CHECK_STR(job->state_extra, "jobnote 100 priority=high\njobnote 100 second\n");
	CHECK(other && other->state_extra == NULL);
	if (step)
		CHECK_STR(step->state_extra, "scopenote 4\n");

	/* Saved, they are written back after their entry's known records (in
	 * this version's header), and read back the same. */
	CHECK_INT(state_file_save(&r, path, err, sizeof(err)), 0);
	size_t len;
	char *text = read_text(&len);
	CHECK(!strncmp(text, "squashd-state 1\nnext ", 21));
	CHECK_CONTAINS(text, "\nnodeinfo epoch=3 cgroup=v2\n");
	CHECK_CONTAINS(text, " /images/a.sqfs\nmountstat 1 reads=12\n");
	CHECK_CONTAINS(text, "/squash/b\njobnote 100 priority=high\njobnote 100 second\n");
	CHECK_CONTAINS(text, "/squash/step\nscopenote 4\n");
	CHECK(!strstr(text, "erofs=0") && !strstr(text, "array=5_3")); /* unknown fields: ignored */
	free(text);
	CHECK_INT(state_file_load(&again, path, err, sizeof(err)), 0);
	CHECK_INT(count_mounts(&again), 2);
	struct job_entry *job2 = registry_find_job(&again, 100);
	if (job2)
		CHECK_STR(job2->state_extra, "jobnote 100 priority=high\njobnote 100 second\n");
	CHECK(job2 && job2->count == 2);
	registry_free(&again);

	/* A released job's unknown records go with it; the mount's stay. */
	if (job)
		registry_remove_job(&r, job);
	CHECK_INT(state_file_save(&r, path, err, sizeof(err)), 0);
	text = read_text(&len);
	CHECK(!strstr(text, "jobnote"));
	CHECK_CONTAINS(text, "mountstat 1 reads=12\n");
	free(text);
	registry_free(&r);
	CHECK(r.state_extra == NULL);
}

static void a_file_of_another_format_is_refused_as_such(void)
{
	char err[512];

	CHECK_INT(load_text("squashd-state 2\nnext 1\nmount 1 1 2 3 4 5 6 -1 0 - /m /i\n", err, sizeof(err)), -2);
	CHECK_CONTAINS(err, "format 2, written by a newer squashd; this one reads format 1");
	CHECK_INT(load_text("squashd-state 0\n", err, sizeof(err)), -2);
	CHECK_CONTAINS(err, "format 0, written by a other squashd");
	CHECK_INT(load_text("squashd-state 1.2\nnext 1\n", err, sizeof(err)), 0);
	CHECK_INT(load_text("squashd-state 12\n", err, sizeof(err)), -2);
	CHECK_INT(load_text("squashd-state 1x\n", err, sizeof(err)), -1);
	CHECK_CONTAINS(err, ":1: not a squashd state file");
	CHECK_INT(load_text("squashd-state\n", err, sizeof(err)), -1);
	CHECK_INT(load_text("SQLite format 3\n", err, sizeof(err)), -1);
}

static void a_truncated_file_loads_whole_records_or_nothing(void)
{
	struct registry saved = { 0 };
	char err[512];
	size_t len;

	fill(&saved);
	state_file_save(&saved, path, err, sizeof(err));
	registry_free(&saved);
	char *full = read_text(&len);
	for (size_t cut = 0; cut < len; cut++) {
		char *part = strndup(full, cut);
		load_text(part, err, sizeof(err)); /* checks the invariant */
		free(part);
	}
	free(full);
	CHECK_INT(load_text("", err, sizeof(err)), 0);
	CHECK_INT(load_text("squashd-state 1", err, sizeof(err)), -1); /* no newline: not the magic line */
	CHECK_CONTAINS(err, ":1: not a squashd state file");
	/* A record kind this version does not know, cut short, is not kept. */
	CHECK_INT(load_text("squashd-state 1\nnext 3\nmou", err, sizeof(err)), 1);
	CHECK_CONTAINS(err, ":3: record cut short");
	CHECK_INT(loaded_entries, 0);
}

static void hostile_records_are_refused_with_the_line(void)
{
	static const char *const bad[] = {
		"squashd-state 1\nnext x\n",
		/* Records of unknown kinds that no version writes. */
		"squashd-state 1\nBogus 1\n",
		"squashd-state 1\n\n",
		"squashd-state 1\n bogus 1\n",
		"squashd-state 1\nbogus 1\t2\n",
		"squashd-state 1\nbo-gus 1\n",
		/* A mount with a NUL escape, an unknown mode, a loop device too long. */
		"squashd-state 1\nmount 1 1 2049 7 10 1 0 -1 0 - /mnt/m%001 /img\n",
		"squashd-state 1\nmount 1 9 2049 7 10 1 0 -1 0 - /mnt/m1 /img\n",
		"squashd-state 1\nmount 1 1 2049 7 10 1 0 -1 0 /dev/loop0123456789012345678901234567890 /mnt/m1 /img\n",
		"squashd-state 1\nmount 1 1 2049 7 10 1 0 -1 0 - /mnt/m1 /img%zz\n",
		/* Images of unknown jobs or mounts; a job twice. */
		"squashd-state 1\nimage 5 0 /a /b\n",
		"squashd-state 1\njob 5 1000 0 -\njob 5 1000 0 -\n", /* (the first stays) */
		/* Linger of a mount that is not there. */
		"squashd-state 1\nlinger 3 1700000000\n",
		/* An overlay beyond the job's images; an upper without overlay. */
		"squashd-state 1\njob 5 1000 0 -\nimage 5 0 /a /b\noverlay 5 /mnt/j1 4\n",
		"squashd-state 1\njob 5 1000 0 -\nimage 5 0 /a /b\nupper 5 0 /home/u\n",
		"squashd-state 1\njob 5 1000 0 -\nimage 5 0 /a /b\noverlay 5 /mnt/j1 1\nupper 5 7 /home/u\n",
		/* A scope of an unknown kind, a session without a pid, a lone simage. */
		"squashd-state 1\nscope 9 1 1 1 1 1000 0 -\n",
		"squashd-state 1\nscope 2 0 0 0 1 1000 0 -\n",
		"squashd-state 1\nsimage 0 /a /b\n",
		/* More images than a job may have. */
		NULL,
	};
	char err[512];

	for (size_t i = 0; bad[i]; i++) {
		CHECK_INT(load_text(bad[i], err, sizeof(err)), 1);
		CHECK_CONTAINS(err, ": malformed record");
		CHECK_INT(loaded_entries, strstr(bad[i], "job 5 1000 0 -\njob 5") ? 1 : 0);
	}
	/* A bad record costs its own entry only: the next one loads, and an
	 * image of the dropped mount is lost like a vanished one. */
	CHECK_INT(load_text("squashd-state 1\nmount 1 9 2049 7 10 1 0 -1 0 - /mnt/m1 /img\nmountnote 1\n"
			    "mount 2 1 2049 8 10 1 0 -1 0 - /mnt/m2 /img2\njob 5 1000 0 -\nimage 5 1 /img /a\n"
			    "image 5 2 /img2 /b\njob 6 1001 0 -\nimage 6 2 /img2 /c\n", err, sizeof(err)), 1);
	CHECK_CONTAINS(err, ":2: malformed record (1 bad record");
	CHECK_INT(loaded_entries, 3);
	struct registry r = { 0 };
	CHECK_INT(state_file_load(&r, path, err, sizeof(err)), 1);
	struct job_entry *j5 = registry_find_job(&r, 5), *j6 = registry_find_job(&r, 6);
	CHECK(j5 && j5->count == 2 && !j5->images[0].mount && j5->images[1].mount &&
	      j5->status == SQUASH__STATUS__NODE_ERROR);
	CHECK(j6 && j6->count == 1 && j6->images[0].mount && j6->status == SQUASH__STATUS__OK);
	CHECK(r.mounts && !r.mounts->next && !r.mounts->state_extra); /* its note went with it */
	registry_free(&r);
	size_t cap = 32 * (SQUASH_MAX_IMAGES + 4);
	char *many = malloc(cap), where[32];
	size_t used = (size_t)snprintf(many, cap, "squashd-state 1\njob 5 1000 0 -\n");
	for (int i = 0; i <= SQUASH_MAX_IMAGES; i++)
		used += (size_t)snprintf(many + used, cap - used, "image 5 0 /a%d /t%d\n", i, i);
	CHECK_INT(load_text(many, err, sizeof(err)), 1);
	CHECK_INT(loaded_entries, 0);
	snprintf(where, sizeof(where), ":%d: malformed record", SQUASH_MAX_IMAGES + 3);
	CHECK_CONTAINS(err, where);
	free(many);
}

/* The state file kept aside in ds's state directory (globbed), or "". */
static void aside_file(const struct daemon_state *ds, char *buf, size_t len)
{
	char pattern[PATH_MAX + 32];
	glob_t g;

	buf[0] = '\0';
	snprintf(pattern, sizeof(pattern), "%s.unreadable-*", ds->state_path);
	if (glob(pattern, 0, NULL, &g) == 0) {
		CHECK_INT(g.gl_pathc, 1);
		snprintf(buf, len, "%s", g.gl_pathv[0]);
		globfree(&g);
	}
}

static Squash__Status refusal(struct daemon_state *ds, char *why, size_t len)
{
	pthread_mutex_lock(&ds->lock);
	Squash__Status st = daemon_refuse_new_mounts_locked(ds, why, len);
	pthread_mutex_unlock(&ds->lock);
	return st;
}

static void squashd_keeps_an_unreadable_file_aside_and_refuses_mounts(const char *text, const char *reason)
{
	char d[] = "/tmp/test_state_file_core.XXXXXX", aside[PATH_MAX + 64], why[4 * PATH_MAX];
	struct squashd_config *cfg = NULL;
	struct daemon_state ds = { 0 }, again = { 0 }, cleared = { 0 };

	if (core_fixture_start(d, &cfg, &ds) < 0) {
		CHECK(!"core fixture");
		return;
	}
	FILE *f = fopen(ds.state_path, "w");
	fputs(text, f);
	fclose(f);
	daemon_load(&ds);
	CHECK_CONTAINS(ds.state_lost, reason);
	CHECK(access(ds.state_path, F_OK) != 0); /* moved, not read over */
	aside_file(&ds, aside, sizeof(aside));
	CHECK_CONTAINS(aside, ".unreadable-");
	CHECK_CONTAINS(ds.state_lost, aside);
	CHECK(ds.registry.mounts == NULL);
	CHECK_INT(refusal(&ds, why, sizeof(why)), SQUASH__STATUS__NODE_ERROR);
	CHECK_CONTAINS(why, "could not read its registry at start (");
	CHECK_CONTAINS(why, "it mounts nothing until an admin has looked");

	/* Kept aside, the file is read by nobody; the kept text is intact. */
	f = fopen(aside, "r");
	char head[64] = "";
	if (f) {
		CHECK(fgets(head, sizeof(head), f) != NULL);
		fclose(f);
	}
	CHECK(!strncmp(head, text, strlen(head)));

	/* A restart (no state file, the kept one still there) refuses too. */
	CHECK_INT(daemon_init(&again, cfg), 0);
	daemon_load(&again);
	CHECK_CONTAINS(again.state_lost, "holds a registry of another format an earlier squashd could not read");
	CHECK_INT(refusal(&again, why, sizeof(why)), SQUASH__STATUS__NODE_ERROR);

	/* Once the admin removed it, squashd starts as usual. */
	unlink(aside);
	CHECK_INT(daemon_init(&cleared, cfg), 0);
	daemon_load(&cleared);
	CHECK_STR(cleared.state_lost, "");
	CHECK_INT(refusal(&cleared, why, sizeof(why)), SQUASH__STATUS__OK);
	daemon_free(&again);
	daemon_free(&cleared);
	core_fixture_stop(d, cfg, &ds);
}

/* A damaged file (a malformed line) is kept aside (a copy) and the
 * entry of the bad record is dropped, to be rebuilt from the node, the
 * others kept: nothing is refused, now or after a restart with the
 * damaged file still aside. */
static void squashd_keeps_a_damaged_file_aside_and_rebuilds(const char *text, const char *reason)
{
	char d[] = "/tmp/test_state_file_core.XXXXXX", aside[PATH_MAX + 64], why[4 * PATH_MAX];
	struct squashd_config *cfg = NULL;
	struct daemon_state ds = { 0 }, again = { 0 };

	if (core_fixture_start(d, &cfg, &ds) < 0) {
		CHECK(!"core fixture");
		return;
	}
	FILE *f = fopen(ds.state_path, "w");
	fputs(text, f);
	fclose(f);
	daemon_load(&ds);
	CHECK_STR(ds.state_lost, "");
	CHECK_CONTAINS(ds.state_rebuilt, reason);
	aside_file(&ds, aside, sizeof(aside));
	CHECK_CONTAINS(ds.state_rebuilt, aside);
	CHECK(ds.registry.mounts && ds.registry.mounts->id == 2 && !ds.registry.mounts->next);
	CHECK_INT(refusal(&ds, why, sizeof(why)), SQUASH__STATUS__OK);
	pthread_mutex_lock(&ds.lock);
	CHECK_INT(daemon_save_grouped_locked(&ds), 0); /* (adoption saves) */
	pthread_mutex_unlock(&ds.lock);

	CHECK_INT(daemon_init(&again, cfg), 0);
	daemon_load(&again);
	CHECK_STR(again.state_lost, "");
	CHECK_STR(again.state_rebuilt, "");
	CHECK_INT(refusal(&again, why, sizeof(why)), SQUASH__STATUS__OK);
	unlink(aside);
	daemon_free(&again);
	core_fixture_stop(d, cfg, &ds);
}

int main(void)
{
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(path, sizeof(path), "%s/state", dir);
	what_was_saved_is_read_back();
	merged_mounts_are_read_back();
	union_mounts_are_read_back();
	a_missing_file_is_an_empty_registry();
	a_truncated_file_loads_whole_records_or_nothing();
	hostile_records_are_refused_with_the_line();
	a_newer_file_of_the_same_format_forgets_no_mount();
	a_file_of_another_format_is_refused_as_such();
	squashd_keeps_an_unreadable_file_aside_and_refuses_mounts("squashd-state 2\nnext 3\nmount 1\n",
								  "format 2, written by a newer squashd");
	squashd_keeps_a_damaged_file_aside_and_rebuilds("squashd-state 1\nnext 3\nmount 1 x\n"
							"mount 2 1 0 0 0 0 0 -1 0 - /m/m2 /i\n",
								  ":3: malformed record");
	unlink(path);
	rmdir(dir);
	return unit_exit_code();
}
