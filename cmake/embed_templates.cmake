# cuinline_embed_templates(OUTPUT file.cpp BASE dir TEMPLATES dir/a.cuh dir/sub/b.cuh ...)
# Generates, at build time, a C++ file that holds every template as a raw string:
#   namespace cuinline::detail { const EmbeddedTemplate kEmbeddedTemplates[]; const size_t kEmbeddedTemplateCount; }
# Each is named by its path relative to BASE ("a.cuh", "sub/b.cuh"), as the sources #include it.
# Editing a .cuh re-runs the generator (the .cuh files are DEPENDS of the custom command).
set(_CUINLINE_EMBED_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/embed_templates_run.cmake)

function(cuinline_embed_templates)
  cmake_parse_arguments(ARG "" "OUTPUT;BASE" "TEMPLATES" ${ARGN})
  list(SORT ARG_TEMPLATES)
  string(REPLACE ";" "|" _list "${ARG_TEMPLATES}")
  add_custom_command(
    OUTPUT ${ARG_OUTPUT}
    COMMAND ${CMAKE_COMMAND} "-DOUTPUT=${ARG_OUTPUT}" "-DBASE=${ARG_BASE}" "-DTEMPLATES=${_list}" -P ${_CUINLINE_EMBED_SCRIPT}
    DEPENDS ${ARG_TEMPLATES} ${_CUINLINE_EMBED_SCRIPT}
    COMMENT "Embedding kernel templates"
    VERBATIM)
endfunction()
