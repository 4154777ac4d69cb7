//! The `lock` property PVE writes into a guest's config for the length of an operation
//! (pve-guest-common `PVE/AbstractConfig.pm` `set_lock`/`remove_lock`): `snapshot` and
//! `snapshot-delete` (`__snapshot_prepare`, `snapshot_delete`), `rollback`
//! (`snapshot_rollback`), `backup` (qemu-server `PVE/VZDump/QemuServer.pm` `lock_vm`,
//! pve-container `PVE/VZDump/LXC.pm`), `migrate` (qemu-server `PVE/QemuMigrate.pm` `phase1`).
//! While it is set, every call that runs `check_lock` refuses the guest: `VM is locked (backup)`.

use crate::state::State;

/// `check_lock` and then `lock` set: PVE's `set_lock`, as a worker's error text.
pub(crate) fn take(st: &mut State, vmid: u32, lock: &str) -> Result<(), String> {
    let Some(g) = st.guests.get_mut(&vmid) else {
        return Err(format!("VM {vmid} does not exist"));
    };
    if let Some(held) = g.lock() {
        return Err(format!("{} is locked ({held})", g.kind.word()));
    }
    g.config.insert("lock".into(), lock.into());
    Ok(())
}

/// Clears `lock` when it is the one an operation took (`remove_lock` with its expected lock).
pub(crate) fn release(st: &mut State, vmid: u32, lock: &str) {
    if let Some(g) = st.guests.get_mut(&vmid)
        && g.lock() == Some(lock)
    {
        g.config.remove("lock");
    }
}
