/* Stand-in for libFuzzer's main: feeds every file of a corpus directory to
 * LLVMFuzzerTestOneInput once, so `make check` replays the seeds and any
 * reproducer saved there, with gcc and without clang. The directory is
 * CORPUS_DIR, or argv[1]. */
#include "config.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path)
{
	uint8_t *data = NULL;
	size_t size = 0;
	FILE *f = fopen(path, "rb");
	long end;

	if (!f || fseek(f, 0, SEEK_END) != 0 || (end = ftell(f)) < 0 ||
	    fseek(f, 0, SEEK_SET) != 0) {
		perror(path);
		if (f)
			fclose(f);
		return -1;
	}
	size = (size_t)end;
	data = malloc(size > 0 ? size : 1);
	if (!data || fread(data, 1, size, f) != size) {
		perror(path);
		free(data);
		fclose(f);
		return -1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(data, size);
	free(data);
	return 0;
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : CORPUS_DIR;
	struct dirent *e;
	char path[4096];
	int files = 0;
	DIR *d = opendir(dir);

	if (!d) {
		perror(dir);
		return 1;
	}
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (replay_file(path) < 0) {
			closedir(d);
			return 1;
		}
		files++;
	}
	closedir(d);
	printf("%s: %d inputs replayed\n", dir, files);
	return files > 0 ? 0 : 1;
}
