// Package skills holds what packages contribute to Switchyard and the rules
// about them: manifests and agent files as people write them, the registry
// of installed packages and their skills, agents, command tools and entry
// points, enablement and settings per scope (global → org → repo → agent),
// and the validation, composition and selection of skill sets. It imports
// nothing else of the project; the agent runtime, the daemon and the
// command line consume it. Installers, which fetch packages, live in
// skills/install.
package skills
