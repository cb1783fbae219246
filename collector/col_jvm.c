/*
 * col_jvm.c - reads an executable's needed libraries with libelf to tell a
 * Java virtual machine (col_jvm.h).
 */
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <string.h>
#include <unistd.h>

#include "col_jvm.h"
#include "rm_err.h"
#include "banned.h"

/* Does the dynamic section s (of e) name libjli.so or libjvm.so? */
static int col_jvm_needs(Elf *e, Elf_Scn *s, const GElf_Shdr *sh)
{
	Elf_Data *d = elf_getdata(s, NULL);
	size_t i, n;

	if (!d || !sh->sh_entsize)
		return 0;
	n = sh->sh_size / sh->sh_entsize;
	for (i = 0; i < n; i++) {
		GElf_Dyn dyn;
		const char *name;

		if (!gelf_getdyn(d, (int)i, &dyn))
			break;
		if (dyn.d_tag == DT_NULL)
			break;
		if (dyn.d_tag != DT_NEEDED || !(name = elf_strptr(e, sh->sh_link, dyn.d_un.d_val)))
			continue;
		if (!strcmp(name, "libjli.so") || !strcmp(name, "libjvm.so"))
			return 1;
	}
	return 0;
}

int col_jvm_is_jvm(const char *path)
{
	Elf_Scn *s = NULL;
	GElf_Shdr sh;
	Elf *e;
	int fd, is_jvm = 0;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return RM_EIO;
	elf_version(EV_CURRENT);
	if ((e = elf_begin(fd, ELF_C_READ, NULL)) != NULL && elf_kind(e) == ELF_K_ELF) {
		while (!is_jvm && (s = elf_nextscn(e, s)) != NULL)
			if (gelf_getshdr(s, &sh) && sh.sh_type == SHT_DYNAMIC)
				is_jvm = col_jvm_needs(e, s, &sh);
	}
	if (e)
		elf_end(e);
	close(fd);
	return is_jvm ? RM_OK : RM_ENOENT;
}
