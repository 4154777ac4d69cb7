//! `GitSource`: the loader reads a commit exactly as it reads the checked-out files.

use crate::support::TestRepo;
use proxops_model::{FsSource, LoadOptions, Registry, RepoSource, Repository, load_repository};
use proxops_store::GitSource;

fn load(source: &dyn RepoSource) -> Repository {
    load_repository(source, &Registry::builtin(), &LoadOptions::default()).unwrap()
}

/// What a load says, without where it read from.
fn summary(repo: &Repository) -> String {
    let mut out = String::new();
    for cluster in &repo.clusters {
        out.push_str(&format!(
            "cluster {} valid={} entry={:?} config={:?}\n",
            cluster.name, cluster.valid, cluster.entry, cluster.config
        ));
        for r in &cluster.resources {
            out.push_str(&format!(
                "  {} {} {}\n  {}\n",
                r.key(),
                r.file.path,
                serde_json::to_string(&r.metadata).unwrap(),
                serde_json::to_string(&r.spec).unwrap()
            ));
        }
    }
    for d in &repo.diagnostics {
        out.push_str(&format!("{d:?}\n"));
    }
    out
}

#[test]
fn a_commit_loads_exactly_like_its_work_tree() {
    let repo = TestRepo::homelab();
    let from_tree = load(&FsSource::new(repo.path()).unwrap());
    let source = GitSource::open(repo.path(), None).unwrap();
    assert_eq!(source.commit().to_string(), repo.head());
    let from_commit = load(&source);
    assert!(from_commit.is_valid());
    assert_eq!(from_commit.clusters.len(), 2);
    assert_eq!(summary(&from_tree), summary(&from_commit));
}

#[test]
fn uncommitted_changes_are_not_seen() {
    let repo = TestRepo::homelab();
    let first = repo.head();
    let jumpbox = "vm/home/jumpbox.yaml";
    let edited = repo
        .read(jumpbox)
        .replace("name: jumpbox", "name: jumpbox-2");
    repo.write(jumpbox, &edited);
    repo.write("vm/home/untracked.yaml", "not: yaml: at all: [");
    let source = GitSource::open(repo.path(), None).unwrap();
    assert_eq!(source.commit().to_string(), first);
    let loaded = load(&source);
    let home = loaded.cluster("home").unwrap();
    assert!(home.resources.iter().any(|r| r.name() == "jumpbox"));
    assert!(!home.resources.iter().any(|r| r.name() == "jumpbox-2"));
    assert!(!source.is_file("vm/home/untracked.yaml"));
    // The work tree does see the edit.
    let worktree = load(&FsSource::new(repo.path()).unwrap());
    assert!(
        worktree
            .cluster("home")
            .unwrap()
            .resources
            .iter()
            .any(|r| r.name() == "jumpbox-2")
    );
}

#[test]
fn a_revision_string_selects_an_older_commit() {
    let repo = TestRepo::homelab();
    let first = repo.head();
    std::fs::remove_file(repo.path().join("vm/home/jumpbox.yaml")).unwrap();
    let compo = repo
        .read("clusters/home/resources.yaml")
        .replace("  - ../../vm/home/jumpbox.yaml\n", "");
    repo.write("clusters/home/resources.yaml", &compo);
    let second = repo.commit_all("drop jumpbox");
    assert_ne!(first, second);
    for (rev, expect_commit, has_jumpbox) in [
        ("HEAD", &second, false),
        ("main", &second, false),
        ("HEAD~1", &first, true),
        (&first[..10], &first, true),
        (first.as_str(), &first, true),
    ] {
        let source = GitSource::open(repo.path(), Some(rev)).unwrap();
        assert_eq!(&source.commit().to_string(), expect_commit, "{rev}");
        let loaded = load(&source);
        assert!(loaded.is_valid(), "{rev}: {:?}", loaded.diagnostics);
        let home = loaded.cluster("home").unwrap();
        assert_eq!(
            home.resources.iter().any(|r| r.name() == "jumpbox"),
            has_jumpbox,
            "{rev}"
        );
    }
    assert!(GitSource::open(repo.path(), Some("no-such-branch")).is_err());
}

#[test]
fn listing_and_reading_follow_git_semantics() {
    let repo = TestRepo::homelab();
    repo.write("extra/a/b.yaml", "x: 1\n");
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink("a/b.yaml", repo.path().join("extra/link.yaml")).unwrap();
        std::os::unix::fs::symlink("../../../etc/passwd", repo.path().join("extra/out.yaml"))
            .unwrap();
    }
    repo.commit_all("extra");
    let source = GitSource::open(repo.path(), None).unwrap();
    let names = |dir: &str| -> Vec<(String, bool)> {
        source
            .list(dir)
            .unwrap()
            .into_iter()
            .map(|e| (e.name, e.is_dir))
            .collect()
    };
    assert!(names("").contains(&("clusters".to_owned(), true)));
    assert!(names("").contains(&("proxops.yaml".to_owned(), false)));
    assert_eq!(names("extra/a"), vec![("b.yaml".to_owned(), false)]);
    assert!(names("nothing/here").is_empty());
    assert_eq!(source.read("extra/a/b.yaml").unwrap(), b"x: 1\n");
    assert_eq!(source.read("./extra//a/b.yaml").unwrap(), b"x: 1\n");
    assert!(matches!(
        source.read("extra/a"),
        Err(proxops_model::source::ReadError::IsDirectory)
    ));
    assert!(matches!(
        source.read("extra/none.yaml"),
        Err(proxops_model::source::ReadError::NotFound)
    ));
    assert!(matches!(
        source.read("../x"),
        Err(proxops_model::source::ReadError::Escapes)
    ));
    #[cfg(unix)]
    {
        assert_eq!(source.read("extra/link.yaml").unwrap(), b"x: 1\n");
        assert!(matches!(
            source.read("extra/out.yaml"),
            Err(proxops_model::source::ReadError::Escapes)
        ));
    }
}
