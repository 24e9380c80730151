/* A uenv image's meta/env.json as its metadata (proto/image_meta_uenv.c):
 * its views become environments whose paths follow the image to where it
 * is seen, in the order uenv applies them; views that cannot be applied
 * are refused with why when named; a file of that name that is not uenv's
 * is no metadata at all (a data image's jobs never fail on it); an
 * image's own .squash/meta comes first. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image_meta.h"
#include "images_env.h"
#include "unit.h"

static const char env_json[] =
	"{\n"
	"  \"description\": \"A test stack\",\n"
	"  \"mount\": \"/user-environment\",\n"
	"  \"name\": \"prgenv-gnu\",\n"
	"  \"views\": {\n"
	"    \"default\": {\n"
	"      \"root\": \"/user-environment/env/default\",\n"
	"      \"env\": {\"version\": 1, \"type\": \"spack-view\", \"values\": {\n"
	"        \"list\": {\n"
	"          \"PATH\": [{\"op\": \"prepend\", \"value\": [\"/user-environment/env/default/bin\",\n"
	"                                               \"/user-environment//env/./x/bin\"]}],\n"
	"          \"MANPATH\": [{\"op\": \"append\", \"value\": [\"/usr/share/extra-man\"]}],\n"
	"          \"PKG_CONFIG_PATH\": [{\"op\": \"set\", \"value\": [\"/user-environment/a\", \"/user-environment/b\"]}],\n"
	"          \"OLD_PATH\": [{\"op\": \"unset\", \"value\": []}]\n"
	"        },\n"
	"        \"scalar\": {\"CUDA_HOME\": \"/user-environment/env/default\", \"MODE\": \"fast\",\n"
	"                   \"GONE\": null, \"ROOT\": \"/user-environment\"}\n"
	"      }}\n"
	"    },\n"
	"    \"develop-gpu\": {\"env\": {\"values\": {\"list\": {}, \"scalar\": {\"DEV\": \"1\"}}}},\n"
	"    \"modules\": {\"activate\": \"/dev/null\", \"root\": \"/user-environment/modules\"},\n"
	"    \"odd\": {\"env\": {\"values\": {\"list\": {\"PATH\": [{\"op\": \"rotate\", \"value\": [\"/x\"]}]}}}},\n"
	"    \"colon\": {\"env\": {\"values\": {\"list\": {\"PATH\": [{\"op\": \"append\", \"value\": [\"/a:/b\"]}]}}}},\n"
	"    \"empty\": {\"env\": {\"values\": {}}},\n"
	"    \"twice\": {\"env\": {\"values\": {}}},\n"
	"    \"twice\": {\"env\": {\"values\": {\"scalar\": {\"LD_PRELOAD\": \"/x.so\"}}}},\n"
	"    \"slurmy\": {\"env\": {\"values\": {\"scalar\": {\"SLURM_JOB_ID\": \"1\"}}}},\n"
	"    \"escape\": {\"env\": {\"values\": {\"scalar\": {\"\\u001b[31mX\\nY\": \"1\"}}}},\n"
	"    \"1bad\": {\"env\": {\"values\": {}}}\n"
	"  }\n"
	"}\n";

/* Environment name's operations for the image seen at mount, as "OP VAR
 * VALUE;" each. */
static char *ops_text(const struct squash_image_meta *m, const char *name, const char *mount, char *err,
		      size_t errlen)
{
	static const char *word[] = { "set", "set-path", "prepend", "append", "unset", "refused" };
	struct squash_env_ops ops;
	char *out = NULL;
	size_t len = 0;
	FILE *f;

	if (squash_image_env_ops(m, name, mount, true, &ops, err, errlen))
		return NULL;
	f = open_memstream(&out, &len);
	for (size_t i = 0; f && i < ops.count; i++)
		fprintf(f, "%s %s %s;", word[ops.op[i].kind], ops.op[i].var, ops.op[i].value);
	if (f)
		fclose(f);
	squash_env_ops_free(&ops);
	return out;
}

static void views_become_environments_that_follow_the_image(void)
{
	struct squash_image_meta m;
	char err[512] = "", *got;

	CHECK_INT(squash_image_meta_from_uenv(env_json, sizeof env_json - 1, &m, err, sizeof err), 1);
	CHECK_STR(m.file, "meta/env.json");
	CHECK_STR(m.target, "/user-environment");
	CHECK_STR(m.name, "prgenv-gnu");
	CHECK_STR(m.description, "A test stack");
	CHECK(m.default_env == NULL); /* uenv applies no view unless asked */
	CHECK(squash_image_meta_has_env(&m, "default") && squash_image_meta_has_env(&m, "develop-gpu"));
	CHECK(!squash_image_meta_has_env(&m, "1bad")); /* no option could name it */

	/* At the target it was built for: the paths as written. */
	got = ops_text(&m, "default", "/user-environment", err, sizeof err);
	CHECK_STR(got, "prepend PATH /user-environment/env/x/bin;prepend PATH /user-environment/env/default/bin;"
		       "append MANPATH /usr/share/extra-man;"
		       "set PKG_CONFIG_PATH ;append PKG_CONFIG_PATH /user-environment/a;"
		       "append PKG_CONFIG_PATH /user-environment/b;unset OLD_PATH ;"
		       "set CUDA_HOME /user-environment/env/default;set MODE fast;unset GONE ;"
		       "set ROOT /user-environment;");
	free(got);
	/* Elsewhere: what lies in the image follows it; what does not stays. */
	got = ops_text(&m, "default", "/squash/gnu", err, sizeof err);
	CHECK_STR(got, "prepend PATH /squash/gnu/env/x/bin;prepend PATH /squash/gnu/env/default/bin;"
		       "append MANPATH /usr/share/extra-man;"
		       "set PKG_CONFIG_PATH ;append PKG_CONFIG_PATH /squash/gnu/a;"
		       "append PKG_CONFIG_PATH /squash/gnu/b;unset OLD_PATH ;"
		       "set CUDA_HOME /squash/gnu/env/default;set MODE fast;unset GONE ;"
		       "set ROOT /squash/gnu;");
	free(got);

	/* Views that cannot be applied say why when named. */
	CHECK(ops_text(&m, "modules", "/user-environment", err, sizeof err) == NULL);
	CHECK_CONTAINS(err, "environment modules cannot be applied: it has only an activation script");
	CHECK(ops_text(&m, "odd", "/user-environment", err, sizeof err) == NULL);
	CHECK_CONTAINS(err, "an operation uenv does not define");
	CHECK(ops_text(&m, "colon", "/user-environment", err, sizeof err) == NULL);
	CHECK_CONTAINS(err, "holds ':'");
	/* A view that changes nothing is there, and applies nothing. */
	got = ops_text(&m, "empty", "/user-environment", err, sizeof err);
	CHECK_STR(got, "");
	free(got);
	/* A name given twice: refused whole, whichever came first. */
	CHECK(ops_text(&m, "twice", "/user-environment", err, sizeof err) == NULL);
	CHECK_CONTAINS(err, "environment twice cannot be applied: it is defined twice in the file");
	/* Slurm's variables refuse the view (only when named: the image's
	 * other views, and its publication, are not held up). */
	CHECK(ops_text(&m, "slurmy", "/user-environment", err, sizeof err) == NULL);
	CHECK_CONTAINS(err, "environment slurmy cannot be applied: it sets SLURM_JOB_ID: Slurm's variables");
	/* A name with control characters is shown escaped. */
	CHECK(ops_text(&m, "escape", "/user-environment", err, sizeof err) == NULL);
	CHECK_CONTAINS(err, "is not a variable name");
	CHECK(strchr(err, '\x1b') == NULL && strchr(err, '\n') == NULL);
	squash_image_meta_free(&m);
}

static void other_files_of_that_name_are_no_metadata(void)
{
	static const char *not_uenv[] = {
		"", "not json", "{\"views\": []}", "[1, 2]", "{\"name\": \"x\"}", "{\"views\": {\"a\": }",
	};
	struct squash_image_meta m;
	char err[256];

	for (size_t i = 0; i < sizeof not_uenv / sizeof not_uenv[0]; i++) {
		err[0] = '\0';
		CHECK_INT(squash_image_meta_from_uenv(not_uenv[i], strlen(not_uenv[i]), &m, err, sizeof err), 0);
		CHECK_CONTAINS(err, "not uenv's metadata");
		CHECK_INT(m.n_env, 0);
	}
	/* A mount point that is not a target is left out, the views kept. */
	static const char odd_mount[] = "{\"mount\": \"rel/a:b\", \"name\": \"bad name\", "
					"\"views\": {\"v\": {\"env\": {\"values\": {\"scalar\": {\"A\": \"/rel/x\"}}}}}}";
	CHECK_INT(squash_image_meta_from_uenv(odd_mount, sizeof odd_mount - 1, &m, err, sizeof err), 1);
	CHECK(m.target == NULL && m.name == NULL);
	CHECK(squash_image_meta_has_env(&m, "v"));
	squash_image_meta_free(&m);
}

static char top[] = "/tmp/test_image_meta_uenv.XXXXXX";

static void write_file(const char *dir, const char *name, const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof path, "%s/%s", dir, name);
	f = fopen(path, "w");
	CHECK(f != NULL);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

/* Fake task environment: PATH and one variable that a view unsets. */
struct fake {
	char path[1024], gone[64];
	bool gone_set;
};

static int fake_get(void *ctx, const char *var, char **value, char *why, size_t whylen)
{
	struct fake *f = ctx;

	(void)why;
	(void)whylen;
	*value = !strcmp(var, "PATH") ? strdup(f->path) : !strcmp(var, "GONE") && f->gone_set ? strdup(f->gone) : NULL;
	return 0;
}

static int fake_set(void *ctx, const char *var, const char *value, char *why, size_t whylen)
{
	struct fake *f = ctx;

	(void)why;
	(void)whylen;
	if (!strcmp(var, "PATH") && value)
		snprintf(f->path, sizeof f->path, "%s", value);
	if (!strcmp(var, "GONE"))
		f->gone_set = value != NULL;
	return 0;
}

static void a_task_gets_the_view_it_names(void)
{
	char dir[512], sub[1200], err[1024] = "";
	struct squash_image_meta m;
	struct fake env = { .path = "/usr/bin", .gone = "x", .gone_set = true };
	const struct squash_env_access access = {
		.option = "--squash-env", .images = "of this step", .get = fake_get, .set = fake_set, .ctx = &env,
	};
	Squash__JobMount jm = SQUASH__JOB_MOUNT__INIT, *jmp = &jm;
	Squash__Response resp = SQUASH__RESPONSE__INIT;

	snprintf(dir, sizeof dir, "%s/gnu", top);
	CHECK_INT(mkdir(dir, 0755), 0);
	snprintf(sub, sizeof sub, "%s/meta", dir);
	CHECK_INT(mkdir(sub, 0755), 0);
	write_file(sub, "env.json", env_json);
	CHECK_INT(squash_image_meta_load(dir, &m, err, sizeof err), 1);
	CHECK_STR(m.file, "meta/env.json");
	squash_image_meta_free(&m);

	jm.image = "/home/u/gnu.squashfs";
	jm.target = dir;
	resp.n_job_mounts = 1;
	resp.job_mounts = &jmp;
	CHECK_INT(squash_images_env_apply(&resp, NULL, &access, err, sizeof err), 0);
	CHECK_STR(env.path, "/usr/bin"); /* no view unless named */
	CHECK_INT(squash_images_env_apply(&resp, "gnu:default", &access, err, sizeof err), 0);
	/* uenv's prepend of [a, b]: a:b:$PATH. */
	snprintf(sub, sizeof sub, "%s/env/default/bin:%s/env/x/bin:/usr/bin", dir, dir);
	CHECK_STR(env.path, sub);
	CHECK(!env.gone_set);
	CHECK_INT(squash_images_env_apply(&resp, "modules", &access, err, sizeof err), -1);
	CHECK_CONTAINS(err, "/meta/env.json: environment modules cannot be applied");

	/* The image's own metadata first. */
	snprintf(sub, sizeof sub, "%s/.squash", dir);
	CHECK_INT(mkdir(sub, 0755), 0);
	write_file(sub, "meta", "format 1\nenv own set A b\n");
	CHECK_INT(squash_image_meta_load(dir, &m, err, sizeof err), 1);
	CHECK_STR(m.file, ".squash/meta");
	CHECK(squash_image_meta_has_env(&m, "own") && !squash_image_meta_has_env(&m, "default"));
	squash_image_meta_free(&m);
	snprintf(sub, sizeof sub, "%s/.squash/meta", dir);
	unlink(sub);
	snprintf(sub, sizeof sub, "%s/.squash", dir);
	rmdir(sub);

	/* A link or garbage at meta/env.json is no metadata, not an error. */
	snprintf(sub, sizeof sub, "%s/meta/env.json", dir);
	unlink(sub);
	CHECK_INT(symlink("/etc/passwd", sub), 0);
	CHECK_INT(squash_image_meta_load(dir, &m, err, sizeof err), 0);
	unlink(sub);
	write_file(dir, "meta/env.json", "\x01garbage");
	CHECK_INT(squash_image_meta_load(dir, &m, err, sizeof err), 0);
	unlink(sub);
	snprintf(sub, sizeof sub, "%s/meta", dir);
	rmdir(sub);
	rmdir(dir);
}

int main(void)
{
	if (!mkdtemp(top)) {
		perror("mkdtemp");
		return 1;
	}
	views_become_environments_that_follow_the_image();
	other_files_of_that_name_are_no_metadata();
	a_task_gets_the_view_it_names();
	rmdir(top);
	return unit_exit_code();
}
