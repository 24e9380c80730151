/* Start profiles: which bytes of which files a program's start reads from
 * an image, recorded once (squash-reader --record-profile, run by
 * squash-pack --profile) and stored in the image as /.squash/start-profile;
 * the reader then asks for those parts of the image right after it opens
 * it, in large reads all in flight together, before the job asks for them
 * one round trip at a time (docs/performance.md, section 18; the format
 * in squash-pack(1), START PROFILES).
 *
 * The format, text, one file per line after a "# squash start profile 1"
 * line:
 *
 *     FROM TO PATH
 *
 * FROM and TO (decimal, FROM < TO) the bytes of the file read, PATH its
 * path in the image without a leading '/', in the order the start first
 * read the files. */
#ifndef SQUASH_READER_START_PROFILE_H
#define SQUASH_READER_START_PROFILE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

struct image;

#define START_PROFILE_PATH ".squash/start-profile"
#define START_PROFILE_HEADER "# squash start profile 1"
/* Bounds on what a profile (a user's bytes) may ask for. */
#define START_PROFILE_MAX_BYTES (4u << 20)   /* the file itself */
#define START_PROFILE_MAX_FILES 65536u       /* lines recorded or read */
#define START_PROFILE_MAX_PREFETCH (512ull << 20) /* image bytes read ahead */
/* Prefetches running at once in one reader (its mounts opened together);
 * another mount's profile is then left out, not queued. */
#define START_PROFILE_MAX_RUNNING 2

/* ---- recording (start_profile_record.c) */

struct profile_recorder;

struct profile_recorder *profile_recorder_new(void);
void profile_recorder_free(struct profile_recorder *rec);
/* The file with inode reference id had bytes [from, to) read. Thread-safe;
 * past START_PROFILE_MAX_FILES files, new ones are not recorded. */
void profile_recorder_note(struct profile_recorder *rec, uint64_t id, uint64_t from, uint64_t to);
/* Notes nothing more from now on (a profile was found after all). */
void profile_recorder_stop(struct profile_recorder *rec);
/* When the first file was noted (CLOCK_MONOTONIC, ms); 0: none yet. */
long long profile_recorder_first_ms(struct profile_recorder *rec);
/* Writes the profile of what was recorded: finds each file's path by a walk
 * of img's tree, given up at deadline_ms (CLOCK_MONOTONIC; 0: never). The
 * number of files written, or -errno (-ETIMEDOUT). */
int profile_recorder_write(struct profile_recorder *rec, struct image *img, FILE *out,
			   long long deadline_ms);

/* ---- prefetching (start_profile_prefetch.c) */

/* One line of a profile. */
struct profile_line {
	uint64_t from, to;
	const char *path; /* into the parsed buffer, NUL-terminated */
};

/* Parses the profile in buf (len bytes, modified: lines are cut there).
 * Calls each(ctx, line) per valid line, in order, until it returns
 * non-zero; lines that break the format are skipped. The lines given, or
 * -EINVAL when the header is missing. */
int start_profile_parse(char *buf, size_t len, int (*each)(void *ctx, const struct profile_line *l),
			void *ctx);

/* img's embedded profile (/.squash/start-profile), malloc'd (at most
 * START_PROFILE_MAX_BYTES), or NULL when it has none. */
char *start_profile_read(struct image *img, size_t *len);
/* The profile img's prefetch and walk use, malloc'd, or NULL: the
 * embedded one, else the one learned for it before (start_profile_learn.c),
 * waited for at most START_PROFILE_LOOKUP_WAIT_MS, less once *stop. */
char *start_profile_bytes(struct image *img, const atomic_bool *stop, size_t *len);

/* Starts reading img's start profile ahead, in a thread of its own, if the
 * image has one (single images only: unions do not). Never waits on the
 * image. */
void start_profile_prefetch_begin(struct image *img);
/* Stops that thread and waits for it (image_close). */
void start_profile_prefetch_end(struct image *img);
/* Waits for that thread to have asked for the whole profile
 * (squash-reader --prefetch). */
void start_profile_prefetch_wait(struct image *img);

/* ---- walking it through the mount (start_profile_walk.c) */

/* What one walk reads through the mount at most, and for how long: the
 * files whose recorded bytes are at most WALK_FILE_MAX. */
#define START_PROFILE_WALK_MAX_DIRS 16384u
#define START_PROFILE_WALK_MAX_MS 30000
#define START_PROFILE_WALK_FILE_MAX (64u << 10)

/* Right after the mount is served: lists the directories the profile's
 * files are in and reads the small files' recorded bytes through the
 * mount whose root is root_fd (O_PATH), in a thread of its own, in the
 * profile's order. The kernel then has the dentries, inodes
 * and pages the start asks for before it asks: its LOOKUPs and READs
 * find them, in parallel with the start instead of a round trip each on
 * its path. Takes root_fd (closed when done). Nothing when img has no
 * profile, records one, or START_PROFILE_MAX_RUNNING walks run. */
void start_profile_walk_begin(struct image *img, int root_fd);
/* Stops that walk and lets go of it once it no longer reads the image
 * (image_close); the walk itself ends by itself, soon, not waited for. */
void start_profile_walk_end(struct image *img);
/* Waits for that walk to end by itself (squash-reader --prefetch --walk). */
void start_profile_walk_wait(struct image *img);

/* ---- learning one (start_profile_learn.c; the cache's files:
 * start_profile_cache.c; docs/architecture.md, "Learned start profiles")
 *
 * For a single image without an embedded profile, with a cache set
 * (--profile-cache TEMPLATE): the profile learned for it before, the file
 * DIR/KEY (DIR the template expanded as the reader's user, KEY
 * start_profile_cache_key's), is used as an embedded one would be;
 * without one the mount's reads are recorded for START_PROFILE_LEARN_MS
 * after its first or until it ends, then written there. Every file
 * operation on the cache is in a thread of its own, which image_close
 * never waits for. */

#define START_PROFILE_LEARN_MS 30000
/* How long a prefetch or walk waits for the cache's answer. */
#define START_PROFILE_LOOKUP_WAIT_MS 3000
/* How long the learned paths are looked for in the image, at most. */
#define START_PROFILE_LEARN_WRITE_MS 2000

/* The process's template (NULL: no cache); before any image opens. */
void start_profile_learn_configure(const char *tmpl);
/* image_open, for a single image: starts learning when a cache is set. */
void start_profile_learn_begin(struct image *img);
/* image_close, after the prefetch and walk ended: the profile learned so
 * far is found in the image (bounded by START_PROFILE_LEARN_WRITE_MS) and
 * left to the thread to write. */
void start_profile_learn_end(struct image *img);
/* Before the process exits: waits up to ms for the writes under way. */
void start_profile_learn_drain(int ms);

/* The cache's key of the image on fd: 16 hex digits (and a NUL) of the
 * 64-bit FNV-1a of its 96-byte superblock followed by its size (8 bytes,
 * little-endian). 0 or -errno. */
int start_profile_cache_key(int fd, char key[17]);
/* DIR/KEY's profile, malloc'd, when it is one: a regular file of the
 * reader's user, not a link, at most START_PROFILE_MAX_BYTES, with the
 * header (its times then set to now: a use). NULL otherwise; *why then says why it was passed over (NULL: no
 * such file). */
char *start_profile_cache_read(const char *dir, const char *key, size_t *len, const char **why);
/* Writes DIR/KEY (mode 0600) atomically: DIR made (0700) as needed, a
 * temporary file in it renamed over KEY. 0 or -errno, *what the step that
 * failed. */
int start_profile_cache_write(const char *dir, const char *key, const char *buf, size_t len,
			      const char **what);

/* What one user's profiles in a directory may come to: the most recently
 * used START_PROFILE_CACHE_KEEP are kept (a use touches the file: its
 * mtime is its last use), those unused for START_PROFILE_CACHE_UNUSED_S
 * go, and so do temporary files of writes that died, after
 * START_PROFILE_CACHE_STALE_TMP_S. At most START_PROFILE_CACHE_SCAN
 * entries of the directory are looked at. */
#define START_PROFILE_CACHE_KEEP 256
#define START_PROFILE_CACHE_UNUSED_S (90 * 24 * 3600)
#define START_PROFILE_CACHE_STALE_TMP_S 3600
#define START_PROFILE_CACHE_SCAN 16384
/* Removes the reader's user's profiles in DIR past those bounds (after a
 * write: the only way the directory grows). The number removed, or -errno
 * when DIR cannot be listed. Other users' files and names that are not a
 * profile's or a write's are left alone. */
int start_profile_cache_prune(const char *dir, time_t now);

#endif
