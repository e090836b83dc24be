//! A runtime for the CLI dispatcher: one frontend, one backend with two servers (one with a
//! check). Mutations apply to its snapshot, so a later command of the same input sees them; a
//! server reference outside the snapshot panics here, which is a dispatcher bug.

use portcullis_runtime_api::cli::{AdminOp, HealthOp, PortSpec, Runtime, SrvRef};
use portcullis_runtime_api::model::*;
use std::net::IpAddr;

pub struct Model {
    snap: Snapshot,
}

fn server(name: &str, id: u32, check: bool) -> ServerSnap {
    let mut s = ServerSnap {
        name: name.into(),
        id,
        op_state: OpState::Running,
        addr: Some([127, 0, 0, 1].into()),
        port: 8000 + id as u16,
        uweight: 1,
        iweight: 1,
        eweight: 1,
        ..ServerSnap::default()
    };
    s.check.configured = check;
    s
}

impl Default for Model {
    fn default() -> Self {
        let fe = ProxySnap {
            name: "fe".into(),
            id: 2,
            mode: ProxyMode::Http,
            frontend: Some(FrontendSnap {
                maxconn: 100,
                ..FrontendSnap::default()
            }),
            ..ProxySnap::default()
        };
        let be = ProxySnap {
            name: "be".into(),
            id: 3,
            mode: ProxyMode::Http,
            backend: Some(BackendSnap {
                algo: "roundrobin".into(),
                dynamic_weights: true,
                dynamic_servers: true,
                ..BackendSnap::default()
            }),
            servers: vec![server("s1", 1, true), server("s2", 2, false)],
            ..ProxySnap::default()
        };
        Model {
            snap: Snapshot {
                info: ProcessInfo::default(),
                proxies: vec![fe, be],
            },
        }
    }
}

impl Model {
    fn srv(&mut self, r: SrvRef) -> &mut ServerSnap {
        let px = &mut self.snap.proxies[r.proxy];
        assert_eq!(px.id, r.proxy_id, "stale proxy reference");
        let sv = &mut px.servers[r.server];
        assert_eq!(sv.id, r.server_id, "stale server reference");
        sv
    }
}

impl Runtime for Model {
    fn snapshot(&self) -> Snapshot {
        self.snap.clone()
    }
    fn set_admin_state(&mut self, r: SrvRef, op: AdminOp) {
        let sv = self.srv(r);
        match op {
            AdminOp::Ready => sv.admin.0 &= !(AdminFlags::FMAINT | AdminFlags::FDRAIN),
            AdminOp::Drain => sv.admin.0 |= AdminFlags::FDRAIN,
            AdminOp::Maint => {
                sv.admin.0 |= AdminFlags::FMAINT;
                sv.op_state = OpState::Stopped;
            }
        }
    }
    fn set_health(&mut self, r: SrvRef, op: HealthOp) {
        self.srv(r).op_state = match op {
            HealthOp::Up => OpState::Running,
            HealthOp::Stopping => OpState::Stopping,
            HealthOp::Down => OpState::Stopped,
        };
    }
    fn set_agent(&mut self, r: SrvRef, _up: bool) {
        self.srv(r);
    }
    fn set_weight(&mut self, r: SrvRef, weight: u32) {
        assert!(weight <= 256, "weight {weight} out of range");
        let sv = self.srv(r);
        sv.uweight = weight;
        sv.eweight = weight;
    }
    fn set_addr(&mut self, r: SrvRef, addr: Option<IpAddr>, port: Option<PortSpec>) {
        let sv = self.srv(r);
        if let Some(a) = addr {
            sv.addr = Some(a);
        }
        match port {
            Some(PortSpec::Fixed(p)) => sv.port = p,
            Some(PortSpec::Mapped(p)) => {
                sv.port = p;
                sv.port_map = true;
            }
            None => {}
        }
    }
    fn set_check_addr(&mut self, r: SrvRef, _addr: IpAddr, _port: Option<u16>) {
        self.srv(r);
    }
    fn set_check_port(&mut self, r: SrvRef, _port: u16) {
        self.srv(r);
    }
    fn set_agent_addr(&mut self, r: SrvRef, _addr: IpAddr, _port: Option<u16>) {
        self.srv(r);
    }
    fn set_agent_port(&mut self, r: SrvRef, _port: u16) {
        self.srv(r);
    }
    fn set_agent_send(&mut self, r: SrvRef, _text: &str) {
        self.srv(r);
    }
    fn set_check_enabled(&mut self, r: SrvRef, on: bool) {
        self.srv(r).check.enabled = on;
    }
    fn set_agent_enabled(&mut self, r: SrvRef, on: bool) {
        self.srv(r).agent.enabled = on;
    }
    fn set_maxconn_server(&mut self, r: SrvRef, maxconn: u32) {
        self.srv(r).maxconn = maxconn;
    }
    fn clear_counters(&mut self, _all: bool) {}
    fn shutdown_sessions(&mut self, r: SrvRef) {
        self.srv(r);
    }
    fn add_server(
        &mut self,
        backend: usize,
        name: &str,
        _addr: &str,
        _kws: &[String],
    ) -> Result<(), String> {
        let px = &mut self.snap.proxies[backend];
        assert!(
            px.backend.is_some(),
            "add server to a proxy without backend"
        );
        if px.servers.iter().any(|s| s.name == name) {
            return Err("Already exists a server with the same name in backend.".into());
        }
        let id = (1..)
            .find(|i| px.servers.iter().all(|s| s.id != *i))
            .unwrap_or(u32::MAX);
        let mut s = server(name, id, false);
        s.admin = AdminFlags(AdminFlags::FMAINT);
        s.op_state = OpState::Stopped;
        px.servers.push(s);
        Ok(())
    }
    fn del_server(&mut self, r: SrvRef) {
        self.srv(r);
        self.snap.proxies[r.proxy].servers.remove(r.server);
    }
    fn set_maxconn_frontend(&mut self, proxy: usize, maxconn: u32) {
        let f = self.snap.proxies[proxy].frontend.as_mut();
        f.expect("set maxconn frontend on a proxy without frontend")
            .maxconn = maxconn;
    }
    fn set_frontend_paused(&mut self, proxy: usize, paused: bool) {
        let f = self.snap.proxies[proxy].frontend.as_mut();
        f.expect("pause a proxy without frontend").state = if paused {
            FrontendState::Paused
        } else {
            FrontendState::Open
        };
    }
}
